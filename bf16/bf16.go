// Package bf16 converts between IEEE float32 and bfloat16, the storage
// type of every weight of the model.
package bf16

import (
	"encoding/binary"
	"math"
)

// FromFloat32 rounds f to the nearest bfloat16, ties to even, the way
// PyTorch's .to(torch.bfloat16) does; NaN stays a quiet NaN.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	round := uint32(0x7fff) + (b>>16)&1
	return uint16((b + round) >> 16)
}

// ToFloat32 widens a bfloat16 exactly.
func ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// Round returns f rounded through bfloat16.
func Round(f float32) float32 { return ToFloat32(FromFloat32(f)) }

// Decode widens little-endian bfloat16 bytes into dst; len(dst) values are read.
func Decode(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// Encode rounds src into little-endian bfloat16 bytes in dst.
func Encode(dst []byte, src []float32) {
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FromFloat32(f))
	}
}
