package kernels

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aimaproject/aimac/bf16"
)

// TestFillMixIsSplitMix64 pins the mixer to splitmix64's published
// outputs for state 0 (its first outputs are mix(γ), mix(2γ), mix(3γ)), so
// the generator is the known one and never changes unnoticed.
func TestFillMixIsSplitMix64(t *testing.T) {
	for i, want := range []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f} {
		if got := mix64(uint64(i+1) * fillGamma); got != want {
			t.Errorf("splitmix64 output %d = %#x, want %#x", i, got, want)
		}
	}
}

// TestFillKnownValues pins a few values of the generator (as float32
// bits): the GPU kernel and every stored expectation depend on them.
func TestFillKnownValues(t *testing.T) {
	name := "model.language_model.embed_tokens.weight"
	h := fnv.New64a()
	h.Write([]byte(name))
	key := FillKey(name)
	if key != h.Sum64() || key != 0xddb796cdcc616f74 {
		t.Fatalf("FillKey(%q) = %#x, want FNV-1a 64 %#x", name, key, h.Sum64())
	}
	for _, c := range []struct {
		seed uint64
		i    int64
		want uint32
	}{{0, 0, 0xbc838440}, {1, 0, 0x3f4f6a0e}, {1, 1, 0xbf0c2ab2}, {1, 1 << 40, 0x3f6d39d4}} {
		if got := math.Float32bits(FillUniform(c.seed, key, c.i, -1, 2)); got != c.want {
			t.Errorf("seed %d, element %d: %#08x, want %#08x", c.seed, c.i, got, c.want)
		}
	}
}

// TestFillProductExact checks the claim the GPU kernel relies on: scale·u
// is exact in float64, so lo + scale·u rounds the same with or without an
// FMA contraction.
func TestFillProductExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		lo := float64(float32(rng.NormFloat64()))
		scale := float64(float32(rng.ExpFloat64()))
		u := float64(rng.Uint64()>>40) * 0x1p-24
		p := scale * u
		if math.FMA(scale, u, -p) != 0 {
			t.Fatalf("%g·%g is not exact in float64", scale, u)
		}
		if float32(lo+p) != float32(math.FMA(scale, u, lo)) {
			t.Fatalf("lo %g scale %g u %g: FMA changes the value", lo, scale, u)
		}
	}
}

// TestFillUniformSlices: the buffer kernels write FillUniform's values
// (rounded to BF16 for the BF16 variant) for i < n only, serially and in
// parallel alike.
func TestFillUniformSlices(t *testing.T) {
	forceParallel(t)
	const n, pad = 10007, 5
	key := FillKey("w")
	f := make([]float32, n+pad)
	h := make([]uint16, n+pad)
	for i := range f {
		f[i], h[i] = -7, 0xffff
	}
	FillUniformF32(f, n, 3, key, -0.25, 0.5)
	FillUniformBF16(h, n, 3, key, -0.25, 0.5)
	for i := range n {
		want := FillUniform(3, key, int64(i), -0.25, 0.5)
		if f[i] != want || h[i] != bf16.FromFloat32(want) {
			t.Fatalf("element %d: f32 %g bf16 %#x, want %g", i, f[i], h[i], want)
		}
	}
	for i := n; i < n+pad; i++ {
		if f[i] != -7 || h[i] != 0xffff {
			t.Fatalf("element %d past n was written", i)
		}
	}
}

// TestFillUniformStatistics: values lie in [lo, lo+scale], their mean and
// variance are the uniform distribution's, neighbouring elements are
// uncorrelated, and another seed or key gives other values.
func TestFillUniformStatistics(t *testing.T) {
	const n = 1 << 18
	lo, scale := float32(-0.3), float32(0.8)
	v := make([]float32, n)
	FillUniformF32(v, n, 11, FillKey("a"), lo, scale)
	var sum, sq, cross float64
	for i, x := range v {
		if x < lo || x > lo+scale {
			t.Fatalf("element %d = %g outside [%g, %g]", i, x, lo, lo+scale)
		}
		d := float64(x) - (float64(lo) + float64(scale)/2)
		sum += d
		sq += d * d
		if i > 0 {
			cross += d * (float64(v[i-1]) - (float64(lo) + float64(scale)/2))
		}
	}
	variance := float64(scale) * float64(scale) / 12
	if mean := sum / n; math.Abs(mean) > 5*math.Sqrt(variance/n) {
		t.Errorf("mean offset %g", mean)
	}
	if r := sq / n / variance; math.Abs(r-1) > 0.02 {
		t.Errorf("variance ratio %g", r)
	}
	if c := cross / n / variance; math.Abs(c) > 0.02 {
		t.Errorf("lag-1 correlation %g", c)
	}
	for _, other := range [][2]uint64{{12, FillKey("a")}, {11, FillKey("b")}} {
		w := make([]float32, 64)
		FillUniformF32(w, 64, other[0], other[1], lo, scale)
		same := 0
		for i := range w {
			if w[i] == v[i] {
				same++
			}
		}
		if same > 2 {
			t.Errorf("seed %d key %#x: %d of 64 values equal the first stream's", other[0], other[1], same)
		}
	}
}
