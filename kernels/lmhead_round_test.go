package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The corrections of rmsnorm_lm_head_int8's div_nocall and rsqrt_nocall
// (lm_head_int8.tmpl), step for step: from a start, move one ulp at a time
// until the exact test in float64 holds.

func f32Prev(x float32) float32 { return math.Float32frombits(math.Float32bits(x) - 1) }
func f32Next(x float32) float32 { return math.Float32frombits(math.Float32bits(x) + 1) }

// correctedDiv is div_nocall from the start q (the device's a·rcp(b)).
func correctedDiv(a, b, q float32) float32 {
	if !(a > 0) || math.IsInf(float64(a), 1) {
		if a != a {
			return math.Float32frombits(0x7fffffff)
		}
		return a
	}
	ad, bd := float64(a), float64(b)
	for range 8 {
		lo, hi := (float64(f32Prev(q))+float64(q))*0.5, (float64(q)+float64(f32Next(q)))*0.5
		if lo*bd > ad {
			q = f32Prev(q)
		} else if hi*bd < ad {
			q = f32Next(q)
		} else {
			if math.Float32bits(q)&1 != 0 {
				if hi*bd == ad {
					q = f32Next(q)
				} else if lo*bd == ad {
					q = f32Prev(q)
				}
			}
			break
		}
	}
	return q
}

// correctedRSqrt is rsqrt_nocall with the root started at y0(v) and the
// reciprocal at q0(y).
func correctedRSqrt(v float32, y0, q0 func(float32) float32) float32 {
	b := math.Float32bits(v)
	switch {
	case b == 0 || b == 0x80000000:
		return math.Float32frombits(b | 0x7f800000)
	case !(v > 0):
		return math.Float32frombits(0x7fffffff)
	case math.IsInf(float64(v), 1):
		return 0
	}
	tiny := v < 0x1p-100
	vs := v
	if tiny {
		vs = v * 0x1p64
	}
	vd := float64(vs)
	y := y0(vs)
	for range 8 {
		lo, hi := (float64(f32Prev(y))+float64(y))*0.5, (float64(y)+float64(f32Next(y)))*0.5
		if lo*lo > vd {
			y = f32Prev(y)
		} else if hi*hi < vd {
			y = f32Next(y)
		} else {
			break
		}
	}
	if tiny {
		y *= 0x1p-32
	}
	return correctedDiv(1, y, q0(y))
}

// offBy is x moved k ulps (towards +Inf for k > 0), staying positive and
// at most +Inf (what an overflowing approximation gives).
func offBy(x float32, k int) float32 {
	u := int64(math.Float32bits(x)) + int64(k)
	return math.Float32frombits(uint32(min(max(u, 1), 0x7f800000)))
}

// TestCorrectedRoundings: from starts up to 4 ulps off on either side, the
// corrections reach the IEEE results rmsnorm_gemv's rsqrtf_ref and its
// division by K compute (each rounded to nearest): means of squares over
// 2048 and odd widths, roots of random floats over the whole exponent
// range, subnormals, powers of two and their neighbours (the binade
// edges), and the special values.
func TestCorrectedRoundings(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	var vs []float32
	for range 20000 {
		vs = append(vs, math.Float32frombits(r.Uint32N(0x7f800000-1)+1)) // every positive finite float
	}
	for e := -149; e <= 127; e++ {
		p := float32(math.Ldexp(1, e))
		vs = append(vs, p, f32Next(p))
		if e > -149 {
			vs = append(vs, f32Prev(p))
		}
	}
	vs = append(vs, 1e-6, 1e-6+1, math.MaxFloat32, math.Float32frombits(1), 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.NaN()), -1, -1e-30)
	exactRSqrt := func(v float32) float32 { return float32(1 / float32(math.Sqrt(float64(v)))) }
	for _, v := range vs {
		want := exactRSqrt(v)
		for k := -4; k <= 4; k++ {
			got := correctedRSqrt(v, func(x float32) float32 { return offBy(float32(math.Sqrt(float64(x))), k) },
				func(y float32) float32 { return offBy(1/y, -k) })
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("rsqrt(%g) from starts %d ulps off: %g (%#x), want %g (%#x)", v, k, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	for _, width := range []float32{2048, 37, 2064, 1} {
		for _, v := range vs {
			if !(v >= 0) && v == v {
				continue // a sum of squares
			}
			want := v / width
			for k := -4; k <= 4; k++ {
				if got := correctedDiv(v, width, offBy(v*(1/width), k)); math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					t.Fatalf("%g / %g from a start %d ulps off: %g, want %g", v, width, k, got, want)
				}
			}
		}
	}
}
