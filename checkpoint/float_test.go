package checkpoint

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFloat32s(t *testing.T) {
	le16 := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	f32 := make([]byte, 8)
	binary.LittleEndian.PutUint32(f32, math.Float32bits(-1.5))
	binary.LittleEndian.PutUint32(f32[4:], math.Float32bits(3e-40))
	tests := []struct {
		name string
		info TensorInfo
		raw  []byte
		want []float32
		err  string
	}{
		{"bf16", TensorInfo{Name: "w", DType: arch.BF16, Shape: []int64{3}}, le16(0x3f80, 0xc000, 0x7f80), []float32{1, -2, float32(math.Inf(1))}, ""},
		{"f16", TensorInfo{Name: "w", DType: arch.F16, Shape: []int64{2, 3}},
			le16(0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555),
			[]float32{1, -2, 65504, 0x1p-24, float32(math.Copysign(0, -1)), 0.333251953125}, ""},
		{"f32", TensorInfo{Name: "w", DType: arch.F32, Shape: []int64{2}}, f32, []float32{-1.5, 3e-40}, ""},
		{"scalar", TensorInfo{Name: "w", DType: arch.BF16, Shape: []int64{}}, le16(0x4040), []float32{3}, ""},
		{"integer dtype", TensorInfo{Name: "w", DType: arch.I32, Shape: []int64{1}}, make([]byte, 4), nil, "tensor w: dtype I32 is not BF16, F16 or F32"},
		{"length mismatch", TensorInfo{Name: "w", DType: arch.F32, Shape: []int64{3}}, make([]byte, 8), nil, "tensor w: 8 bytes, shape [3] of F32 needs 12"},
		{"negative dimension", TensorInfo{Name: "w", DType: arch.F32, Shape: []int64{-1}}, nil, nil, "tensor w: negative dimension in shape [-1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Float32s(tt.info, tt.raw)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.err {
				t.Errorf("error %q, want %q", gotErr, tt.err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			for i := range got { // cmp treats -0 == +0; the sign must survive
				if math.Signbit(float64(got[i])) != math.Signbit(float64(tt.want[i])) {
					t.Errorf("value %d: sign of %v lost", i, tt.want[i])
				}
			}
		})
	}
}

// Every binary16 value widens to exactly sign·2^(e−15)·(1+m/1024), or
// sign·2^−14·m/1024 for subnormals, computed independently in float64.
func TestHalfToFloat32Exhaustive(t *testing.T) {
	for h := range 1 << 16 {
		sign, e, m := h>>15, (h>>10)&0x1f, h&0x3ff
		got := halfToFloat32(uint16(h))
		var want float64
		switch {
		case e == 0x1f && m == 0:
			want = math.Inf(1)
		case e == 0x1f:
			if !math.IsNaN(float64(got)) || math.Float32bits(got)>>13&0x3ff != uint32(m) {
				t.Fatalf("%#04x: got %v (%#08x), want NaN with payload %#x", h, got, math.Float32bits(got), m)
			}
			continue
		case e == 0:
			want = math.Ldexp(float64(m)/1024, -14)
		default:
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if sign == 1 {
			want = -want
		}
		if float64(got) != want || math.Signbit(float64(got)) != (sign == 1) {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
	}
}
