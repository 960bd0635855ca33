package kernels

import "math"

// expf is exp in float32, rounded from the float64 result.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// sigmoid is 1 / (1 + e^-x), as torch.sigmoid.
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// silu is x·sigmoid(x), as torch.nn.functional.silu.
func silu(x float32) float32 { return x / (1 + expf(-x)) }

// softplus is log(1 + e^x) with torch's default threshold: x > 20 returns x.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// rsqrt is 1/sqrt(x) in float32.
func rsqrt(x float32) float32 { return 1 / float32(math.Sqrt(float64(x))) }

// widen converts a BF16 bit pattern to float32 (the same as bf16.ToFloat32,
// spelled out so that it inlines into the inner loops).
func widen(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// dot returns Σ a[i]·b[i] over len(a), in float32 with four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dotBF16 returns Σ a[i]·w[i] over len(a) with w in BF16, like dot.
func dotBF16(a []float32, w []uint16) float32 {
	w = w[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * widen(w[i])
		s1 += a[i+1] * widen(w[i+1])
		s2 += a[i+2] * widen(w[i+2])
		s3 += a[i+3] * widen(w[i+3])
	}
	for ; i < len(a); i++ {
		s0 += a[i] * widen(w[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy does y[i] += a·x[i] over len(y).
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// scaleVec does y[i] *= a over len(y).
func scaleVec(y []float32, a float32) {
	for i := range y {
		y[i] *= a
	}
}

// sumSquares returns Σ x[i]² in float32.
func sumSquares(x []float32) float32 { return dot(x, x) }
