package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/google/go-cmp/cmp"
)

// poisonBits is a NaN with a recognizable payload: padding rows of outputs
// are filled with it and must keep exactly these bits.
const poisonBits = 0x7fc0dead

func poisonValue() float32 { return math.Float32frombits(poisonBits) }

// poison fills xs with the poison NaN. Input padding poisoned this way would
// turn any result that read it into NaN.
func poison(xs []float32) {
	for i := range xs {
		xs[i] = poisonValue()
	}
}

// checkPoisoned reports the first element of xs that lost its poison.
func checkPoisoned(t *testing.T, what string, xs []float32) {
	t.Helper()
	for i, v := range xs {
		if math.Float32bits(v) != poisonBits {
			t.Errorf("%s: padding element %d was written (%v)", what, i, v)
			return
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randVec returns n normal values with standard deviation sd.
func randVec(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

// randUniform returns n values uniform in [lo, hi).
func randUniform(r *rand.Rand, n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*r.Float64())
	}
	return v
}

// randBF16 returns n normal values with standard deviation sd, rounded to BF16.
func randBF16(r *rand.Rand, n int, sd float64) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = bf16.FromFloat32(float32(r.NormFloat64() * sd))
	}
	return w
}

// wideBF16 widens BF16 weights to float64 for the naive references.
func wideBF16(w []uint16) []float64 {
	out := make([]float64, len(w))
	for i, h := range w {
		out[i] = float64(bf16.ToFloat32(h))
	}
	return out
}

func f64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func f32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

// approx compares float32 values as equal when |a−b| ≤ atol + rtol·max(|a|,|b|)
// (two NaNs compare equal; exact equality always passes).
func approx(atol, rtol float64) cmp.Option {
	return cmp.Comparer(func(a, b float32) bool {
		if a == b || (a != a && b != b) {
			return true
		}
		x, y := float64(a), float64(b)
		return math.Abs(x-y) <= atol+rtol*math.Max(math.Abs(x), math.Abs(y))
	})
}

// exact compares float32 values bit for bit (so NaN payloads count too).
var exact = cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })

// maxRelDiff returns max|got−want| / max(1, max|want|).
func maxRelDiff(got, want []float32) float64 {
	var diff, mag float64
	for i := range want {
		diff = math.Max(diff, math.Abs(float64(got[i])-float64(want[i])))
		mag = math.Max(mag, math.Abs(float64(want[i])))
	}
	return diff / math.Max(1, mag)
}

func sigmoid64(x float64) float64  { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64     { return x * sigmoid64(x) }
func softplus64(x float64) float64 { return math.Log1p(math.Exp(x)) }

// forceParallel makes every parallelFor use several goroutines, however
// small the input, until the test ends.
func forceParallel(t *testing.T) {
	oldWork := minParallelWork
	oldProcs := runtime.GOMAXPROCS(4)
	minParallelWork = 1
	t.Cleanup(func() {
		minParallelWork = oldWork
		runtime.GOMAXPROCS(oldProcs)
	})
}

func TestParallelForCoversEachIndexOnce(t *testing.T) {
	forceParallel(t)
	for _, n := range []int{0, 1, 2, 3, 7, 16, 100, 1001} {
		for _, cost := range []int{0, 1, 1 << 20} {
			t.Run(fmt.Sprintf("n=%d/cost=%d", n, cost), func(t *testing.T) {
				hits := make([]int32, n)
				parallelFor(n, cost, func(lo, hi int) {
					if lo >= hi {
						t.Errorf("empty range [%d, %d)", lo, hi)
					}
					for i := lo; i < hi; i++ {
						hits[i]++ // ranges are disjoint, so no race
					}
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("index %d visited %d times", i, h)
					}
				}
			})
		}
	}
}
