package bf16

import (
	"math"
	"testing"
)

func TestFromFloat32(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"minus two", -2, 0xc000},
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"tie rounds to even (down)", math.Float32frombits(0x3f808000), 0x3f80},
		{"tie rounds to even (up)", math.Float32frombits(0x3f818000), 0x3f82},
		{"above tie rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"overflow to infinity", math.MaxFloat32, 0x7f80},
		{"infinity", float32(math.Inf(1)), 0x7f80},
		{"nan stays nan", float32(math.NaN()), 0x7fc0},
	}
	for _, tt := range tests {
		if got := FromFloat32(tt.in); got != tt.want {
			t.Errorf("%s: FromFloat32(%v) = %#04x, want %#04x", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := FromFloat32(f); got != uint16(h) {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)) = %#04x", h, got)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	src := []float32{1.5, -0.25, 3.140625}
	buf := make([]byte, 2*len(src))
	Encode(buf, src)
	dst := make([]float32, len(src))
	Decode(dst, buf)
	for i := range src {
		if dst[i] != src[i] {
			t.Errorf("value %d: got %v, want %v", i, dst[i], src[i])
		}
	}
}
