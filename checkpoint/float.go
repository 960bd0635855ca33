package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
)

// Float32s widens a BF16, F16 or F32 tensor's raw bytes to float32, for small
// parameters (norms, A_log, dt_bias) the host needs in full precision.
func Float32s(info TensorInfo, raw []byte) ([]float32, error) {
	switch info.DType {
	case arch.BF16, arch.F16, arch.F32:
	default:
		return nil, fmt.Errorf("tensor %s: dtype %s is not BF16, F16 or F32", show(info.Name), info.DType)
	}
	size := DTypeSize(info.DType)
	for _, d := range info.Shape {
		if d < 0 {
			return nil, fmt.Errorf("tensor %s: negative dimension in shape %v", show(info.Name), info.Shape)
		}
	}
	need, ok := byteSize(info.Shape, size)
	if !ok || int64(len(raw)) != need {
		return nil, fmt.Errorf("tensor %s: %d bytes, shape %v of %s needs %d", show(info.Name), len(raw), info.Shape, info.DType, need)
	}
	out := make([]float32, len(raw)/size)
	switch info.DType {
	case arch.BF16:
		bf16.Decode(out, raw)
	case arch.F16:
		for i := range out {
			out[i] = halfToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case arch.F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	}
	return out, nil
}

// halfToFloat32 widens an IEEE binary16 exactly: subnormals are normalised,
// infinities and NaN payloads are kept.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal: rebias 15 → 127
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant·2⁻²⁴; shift the leading one into the implicit bit.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}
