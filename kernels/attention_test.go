package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRopeInvFreq(t *testing.T) {
	const rotDim, theta = 64, 1e7
	inv := ropeInvFreq(rotDim, theta)
	if len(inv) != rotDim/2 || inv[0] != 1 {
		t.Fatalf("len %d, inv[0] = %v; want %d, 1", len(inv), inv[0], rotDim/2)
	}
	for j, got := range inv {
		want := math.Pow(theta, -2*float64(j)/rotDim)
		if math.Abs(float64(got)-want) > 3e-7*want {
			t.Errorf("inv_freq[%d] = %v, want %v", j, got, want)
		}
	}
}

// naiveRoPE rotates pairs (j, j+rotDim/2) by pos·inv_freq[j] in float64,
// except that the angle is the float32 product of HF (an exact angle drifts
// from it by up to an ulp of the angle, 1.5e-5 rad near 250). inv_freq comes
// from ropeInvFreq, tested above: torch's float32 steps (power, then
// reciprocal) can be an ulp off the exact value, which moves angles near
// position 250 by ~1e-5.
func naiveRoPE(x []float32, rowStride, n, heads, headDim, rotDim, pos0 int, theta float64) []float32 {
	y := append([]float32(nil), x...)
	half := rotDim / 2
	inv := ropeInvFreq(rotDim, theta)
	for t := range n {
		for h := range heads {
			base := t*rowStride + h*headDim
			for j := range half {
				angle := float64(float32(pos0+t) * inv[j])
				a, b := float64(x[base+j]), float64(x[base+j+half])
				y[base+j] = float32(a*math.Cos(angle) - b*math.Sin(angle))
				y[base+j+half] = float32(b*math.Cos(angle) + a*math.Sin(angle))
			}
		}
	}
	return y
}

func TestRoPE(t *testing.T) {
	t.Run("hand computed", func(t *testing.T) {
		// theta is irrelevant for j = 0 (inv_freq = 1): position 1 rotates by 1 rad,
		// and the dims past rotDim pass through.
		x := []float32{1, 0, 0, 1, 7}
		RoPE(x, 5, 1, 1, 5, 4, 1, 10000)
		c, s := float32(math.Cos(1)), float32(math.Sin(1))
		if diff := cmp.Diff([]float32{c, -float32(math.Sin(0.01)), s, float32(math.Cos(0.01)), 7}, x, approx(1e-7, 1e-6)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	const pad = 2
	for _, tt := range []struct {
		n, heads, headDim, rotDim, pos0, stride int
		theta                                   float64
	}{
		{1, 2, 16, 8, 0, 32, 1e7},            // position 0 is the identity
		{5, 3, 16, 8, 37, 48, 1e7},           // decode after a prompt
		{4, 2, 32, 32, 3, 72, 10000},         // full rotation, stride past the heads
		{3, 16, 256, 64, 250, 16 * 256, 1e7}, // model sizes (q after q_norm)
	} {
		t.Run(fmt.Sprintf("%+v", tt), func(t *testing.T) {
			r := newRand(70)
			x := randVec(r, (tt.n+pad)*tt.stride, 1)
			poison(x[tt.n*tt.stride:])
			want := naiveRoPE(x, tt.stride, tt.n, tt.heads, tt.headDim, tt.rotDim, tt.pos0, tt.theta)
			RoPE(x, tt.stride, tt.n, tt.heads, tt.headDim, tt.rotDim, tt.pos0, tt.theta)
			if diff := cmp.Diff(want[:tt.n*tt.stride], x[:tt.n*tt.stride], approx(2e-6, 2e-6)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", x[tt.n*tt.stride:])
		})
	}
	t.Run("far position uses the float32 angle", func(t *testing.T) {
		// At position 100003 with inv_freq[1] = 1/theta^(2/4) = 0.01 (theta 10⁴), the
		// angle is the float32 product, as in HF, not the exact 1000.03.
		x := []float32{0, 1, 0, 0}
		RoPE(x, 4, 1, 1, 4, 4, 100003, 10000)
		angle := float64(float32(100003) * float32(0.01))
		if math.Abs(angle-1000.03) < 1e-5 {
			t.Fatalf("test needs a float32 angle that differs from the exact one, got %v", angle)
		}
		want := []float32{0, float32(math.Cos(angle)), 0, float32(math.Sin(angle))}
		if diff := cmp.Diff(want, x, approx(1e-7, 1e-6)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestKVAppend(t *testing.T) {
	const width, capacity = 3, 6
	kc, vc := make([]float32, capacity*width), make([]float32, capacity*width)
	poison(kc)
	poison(vc)
	k := []float32{1, 2, 3, 4, 5, 6, 99, 99, 99} // the third row is padding
	v := []float32{-1, -2, -3, -4, -5, -6, 99, 99, 99}
	KVAppend(kc, vc, k, v, 2, 2, width)
	if diff := cmp.Diff(k[:2*width], kc[2*width:4*width], exact); diff != "" {
		t.Errorf("k cache (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(v[:2*width], vc[2*width:4*width], exact); diff != "" {
		t.Errorf("v cache (-want +got):\n%s", diff)
	}
	for _, c := range [][]float32{kc[:2*width], kc[4*width:], vc[:2*width], vc[4*width:]} {
		checkPoisoned(t, "cache rows outside pos0..pos0+n-1", c)
	}
}

// naiveAttention is SPEC §2.3 step 5 in float64.
func naiveAttention(q, kc, vc []float32, n, pos0, hq, hkv, d int, scale float64) []float32 {
	out := make([]float64, n*hq*d)
	for t := range n {
		for h := range hq {
			kvh := h / (hq / hkv)
			length := pos0 + t + 1
			s := make([]float64, length)
			maxS := math.Inf(-1)
			for p := range length {
				for i := range d {
					s[p] += float64(q[(t*hq+h)*d+i]) * float64(kc[(p*hkv+kvh)*d+i])
				}
				s[p] *= scale
				maxS = math.Max(maxS, s[p])
			}
			var sum float64
			for p := range s {
				s[p] = math.Exp(s[p] - maxS)
				sum += s[p]
			}
			for p := range s {
				for i := range d {
					out[(t*hq+h)*d+i] += s[p] / sum * float64(vc[(p*hkv+kvh)*d+i])
				}
			}
		}
	}
	return f32(out)
}

func TestAttentionHandComputed(t *testing.T) {
	// One head, d = 1, two cached positions with scores 0 and ln 3 (scale 1):
	// weights 1/4 and 3/4.
	kc := []float32{0, float32(math.Log(3))}
	vc := []float32{4, 8}
	out := []float32{0}
	Attention(out, []float32{1}, kc, vc, 1, 1, 1, 1, 1, 1)
	if diff := cmp.Diff([]float32{7}, out, approx(0, 1e-6)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestAttention(t *testing.T) {
	const pad = 2
	for _, tt := range []struct{ n, pos0, hq, hkv, d int }{
		{1, 0, 2, 1, 8},  // first token attends only to itself
		{6, 0, 4, 2, 8},  // prefill: causal mask inside the step
		{1, 9, 8, 2, 16}, // decode over a filled cache, GQA group 4
		{5, 7, 4, 4, 4},  // chunked prefill after a prompt, MHA
	} {
		t.Run(fmt.Sprintf("%+v", tt), func(t *testing.T) {
			r := newRand(80)
			width := tt.hkv * tt.d
			capacity := tt.pos0 + tt.n + pad
			kc := randVec(r, capacity*width, 1)
			vc := randVec(r, capacity*width, 1)
			poison(kc[(tt.pos0+tt.n)*width:]) // future positions must not be read
			poison(vc[(tt.pos0+tt.n)*width:])
			q := randVec(r, (tt.n+pad)*tt.hq*tt.d, 1.5)
			poison(q[tt.n*tt.hq*tt.d:])
			scale := 1 / math.Sqrt(float64(tt.d))
			want := naiveAttention(q, kc, vc, tt.n, tt.pos0, tt.hq, tt.hkv, tt.d, scale)
			out := make([]float32, len(q))
			poison(out)
			Attention(out, q, kc, vc, tt.n, tt.pos0, tt.hq, tt.hkv, tt.d, float32(scale))
			if diff := cmp.Diff(want, out[:tt.n*tt.hq*tt.d], approx(1e-6, 1e-5)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", out[tt.n*tt.hq*tt.d:])
		})
	}
}

// TestAttentionPrefillSplit checks that prefilling a then b tokens (appending
// each step's K/V before attending) equals prefilling a+b at once.
func TestAttentionPrefillSplit(t *testing.T) {
	const total, hq, hkv, d, capacity = 12, 4, 2, 8, 16
	const width = hkv * d
	r := newRand(90)
	q := randVec(r, total*hq*d, 1)
	k := randVec(r, total*width, 1)
	v := randVec(r, total*width, 1)
	scale := float32(1 / math.Sqrt(d))

	newCache := func() (kc, vc []float32) {
		kc, vc = make([]float32, capacity*width), make([]float32, capacity*width)
		poison(kc)
		poison(vc)
		return kc, vc
	}
	kc, vc := newCache()
	whole := make([]float32, total*hq*d)
	KVAppend(kc, vc, k, v, total, 0, width)
	Attention(whole, q, kc, vc, total, 0, hq, hkv, d, scale)

	for _, a := range []int{1, 5, 11} {
		kc2, vc2 := newCache()
		out := make([]float32, total*hq*d)
		KVAppend(kc2, vc2, k, v, a, 0, width)
		Attention(out, q, kc2, vc2, a, 0, hq, hkv, d, scale)
		KVAppend(kc2, vc2, k[a*width:], v[a*width:], total-a, a, width)
		Attention(out[a*hq*d:], q[a*hq*d:], kc2, vc2, total-a, a, hq, hkv, d, scale)
		if diff := cmp.Diff(whole, out, exact); diff != "" {
			t.Errorf("split at %d: outputs (-one call +two calls):\n%s", a, diff)
		}
		if diff := cmp.Diff(kc, kc2, exact); diff != "" {
			t.Errorf("split at %d: k cache (-one call +two calls):\n%s", a, diff)
		}
		if diff := cmp.Diff(vc, vc2, exact); diff != "" {
			t.Errorf("split at %d: v cache (-one call +two calls):\n%s", a, diff)
		}
	}

	// The split of the work among goroutines does not change the result either.
	forceParallel(t)
	out := make([]float32, total*hq*d)
	Attention(out, q, kc, vc, total, 0, hq, hkv, d, scale)
	if diff := cmp.Diff(whole, out, exact); diff != "" {
		t.Errorf("parallel (-serial +parallel):\n%s", diff)
	}
}
