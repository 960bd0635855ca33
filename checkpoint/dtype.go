package checkpoint

import (
	"math"

	"github.com/aimaproject/aimac/arch"
)

// Safetensors element types arch does not name; the text model never uses
// them, but a checkpoint may carry them (vision tower, quantizer scales), so
// headers holding them must still parse.
const (
	F64    arch.DType = "F64"
	I8     arch.DType = "I8"
	I16    arch.DType = "I16"
	U8     arch.DType = "U8"
	U16    arch.DType = "U16"
	U32    arch.DType = "U32"
	U64    arch.DType = "U64"
	Bool   arch.DType = "BOOL"
	F8E4M3 arch.DType = "F8_E4M3"
	F8E5M2 arch.DType = "F8_E5M2"
	F8E8M0 arch.DType = "F8_E8M0"
)

// DTypeSize is the element size in bytes of every whole-byte safetensors
// dtype, 0 for unknown or sub-byte ones (F4, F6_*), which this reader rejects.
func DTypeSize(d arch.DType) int {
	if n := d.Size(); n > 0 {
		return n
	}
	switch d {
	case U8, I8, Bool, F8E4M3, F8E5M2, F8E8M0:
		return 1
	case I16, U16:
		return 2
	case U32:
		return 4
	case F64, U64:
		return 8
	}
	return 0
}

// mul multiplies non-negative int64s, reporting overflow instead of wrapping.
func mul(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > math.MaxInt64/b {
		return 0, false
	}
	return a * b, true
}

// byteSize is product(shape)·size with checked arithmetic; a zero dimension
// makes the tensor empty however large the others are.
func byteSize(shape []int64, size int) (int64, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true
		}
	}
	n := int64(size)
	for _, d := range shape {
		var ok bool
		if n, ok = mul(n, d); !ok {
			return 0, false
		}
	}
	return n, true
}
