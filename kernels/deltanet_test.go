package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// naiveConv is SPEC §3 step 2 in float64 over history ‖ in, returning the
// outputs of the n new tokens and the last K−1 inputs.
func naiveConv(in, w, hist []float32, n, channels, kernel int) (out, state []float32) {
	seq := append(append([]float32(nil), hist...), in[:n*channels]...)
	outs := make([]float64, n*channels)
	for t := range n {
		for c := range channels {
			var s float64
			for m := range kernel {
				s += float64(w[c*kernel+m]) * float64(seq[(t+m)*channels+c])
			}
			outs[t*channels+c] = silu64(s)
		}
	}
	return f32(outs), seq[n*channels:]
}

func TestCausalConv1dSiLUHandComputed(t *testing.T) {
	// One channel, K=3, weights [1, 10, 100]; previous inputs 1, 2.
	w := []float32{1, 10, 100}
	state := []float32{1, 2}
	out := make([]float32, 2)
	CausalConv1dSiLU(out, []float32{3, 4}, w, state, 2, 1, 3)
	want := []float32{silu(1 + 20 + 300), silu(2 + 30 + 400)}
	if diff := cmp.Diff(want, out, exact); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float32{3, 4}, state, exact); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestCausalConv1dSiLU(t *testing.T) {
	const channels, kernel, pad = 6, 4, 3
	for _, n := range []int{1, 2, 3, 4, 9} {
		for _, zeroStart := range []bool{true, false} {
			t.Run(fmt.Sprintf("n=%d/zeroStart=%v", n, zeroStart), func(t *testing.T) {
				r := newRand(10)
				in := randVec(r, (n+pad)*channels, 1)
				poison(in[n*channels:])
				w := randVec(r, channels*kernel, 0.5)
				state := make([]float32, (kernel-1)*channels)
				if !zeroStart {
					state = randVec(r, (kernel-1)*channels, 1)
				}
				wantOut, wantState := naiveConv(in, w, state, n, channels, kernel)
				out := make([]float32, (n+pad)*channels)
				poison(out)
				CausalConv1dSiLU(out, in, w, state, n, channels, kernel)
				if diff := cmp.Diff(wantOut, out[:n*channels], approx(1e-6, 1e-5)); diff != "" {
					t.Errorf("outputs (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantState, state, exact); diff != "" {
					t.Errorf("state (-want +got):\n%s", diff)
				}
				checkPoisoned(t, "rows ≥ n", out[n*channels:])
			})
		}
	}
}

func TestCausalConv1dSiLUSplit(t *testing.T) {
	const channels, kernel, total = 5, 4, 9
	r := newRand(11)
	in := randVec(r, total*channels, 1)
	w := randVec(r, channels*kernel, 0.5)
	init := randVec(r, (kernel-1)*channels, 1)

	wholeState := append([]float32(nil), init...)
	whole := make([]float32, total*channels)
	CausalConv1dSiLU(whole, in, w, wholeState, total, channels, kernel)

	for _, a := range []int{1, 2, 3, 5, 8} {
		state := append([]float32(nil), init...)
		out := make([]float32, total*channels)
		CausalConv1dSiLU(out, in, w, state, a, channels, kernel)
		CausalConv1dSiLU(out[a*channels:], in[a*channels:], w, state, total-a, channels, kernel)
		if diff := cmp.Diff(whole, out, exact); diff != "" {
			t.Errorf("split at %d: outputs (-one call +two calls):\n%s", a, diff)
		}
		if diff := cmp.Diff(wholeState, state, exact); diff != "" {
			t.Errorf("split at %d: state (-one call +two calls):\n%s", a, diff)
		}
	}

	forceParallel(t)
	state := append([]float32(nil), init...)
	out := make([]float32, total*channels)
	CausalConv1dSiLU(out, in, w, state, total, channels, kernel)
	if diff := cmp.Diff(whole, out, exact); diff != "" {
		t.Errorf("parallel: outputs (-serial +parallel):\n%s", diff)
	}
	if diff := cmp.Diff(wholeState, state, exact); diff != "" {
		t.Errorf("parallel: state (-serial +parallel):\n%s", diff)
	}
}

func TestGDNGates(t *testing.T) {
	const n, heads = 2, 3
	b := []float32{0, 2, -3, 1, -1, 0.5, float32(math.NaN()), 0, 0} // last row: padding
	a := []float32{0, 25, -4, 1, -30, 3, float32(math.NaN()), 0, 0}
	aLog := []float32{0, float32(math.Log(4)), -2}
	dtBias := []float32{0, 0, 1}
	beta := make([]float32, (n+1)*heads)
	g := make([]float32, (n+1)*heads)
	poison(beta)
	poison(g)
	GDNGates(beta, g, b, a, aLog, dtBias, n, heads)
	var wantBeta, wantG []float64
	for i := range n * heads {
		h := i % heads
		wantBeta = append(wantBeta, sigmoid64(float64(b[i])))
		x := float64(a[i]) + float64(dtBias[h])
		sp := softplus64(x)
		if x > 20 {
			sp = x
		}
		wantG = append(wantG, -math.Exp(float64(aLog[h]))*sp)
	}
	if diff := cmp.Diff(f32(wantBeta), beta[:n*heads], approx(0, 1e-6)); diff != "" {
		t.Errorf("beta (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(f32(wantG), g[:n*heads], approx(0, 1e-6)); diff != "" {
		t.Errorf("g (-want +got):\n%s", diff)
	}
	// Hand values: head 1 of token 0 is above the softplus threshold, so g = −4·25.
	if g[1] != -100 || beta[0] != 0.5 {
		t.Errorf("g[1] = %v, beta[0] = %v; want -100, 0.5", g[1], beta[0])
	}
	checkPoisoned(t, "beta rows ≥ n", beta[n*heads:])
	checkPoisoned(t, "g rows ≥ n", g[n*heads:])
}

// deltaCase holds realistic Gated DeltaNet inputs: q, k, v interleaved in one
// conv-output-like buffer (row stride = 2·hk·dk + hv·dv), l2-normalized q
// (scaled by 1/sqrt(dk)) and k, g ≤ 0 and beta in (0, 1) from GDNGates,
// and a non-zero initial state. Rows n..n+pad-1 are poisoned padding.
type deltaCase struct {
	n, hk, hv, dk, dv, stride int
	qkv, beta, g, state       []float32
}

func newDeltaCase(seed uint64, n, pad, hk, hv, dk, dv int) *deltaCase {
	r := newRand(seed)
	c := &deltaCase{n: n, hk: hk, hv: hv, dk: dk, dv: dv, stride: 2*hk*dk + hv*dv}
	c.qkv = randVec(r, (n+pad)*c.stride, 1)
	L2NormHeads(c.qkv, c.stride, n, hk, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	L2NormHeads(c.qkv[hk*dk:], c.stride, n, hk, dk, 1e-6, 1)
	poison(c.qkv[n*c.stride:])
	// Decay rates spanning slow (A = 0.01) to fast (A = 16) heads.
	aLog := randUniform(r, hv, math.Log(0.01), math.Log(16))
	dtBias := randUniform(r, hv, -1, 1)
	a := randVec(r, n*hv, 1.5)
	b := randVec(r, n*hv, 1.5)
	c.beta = make([]float32, (n+pad)*hv)
	c.g = make([]float32, (n+pad)*hv)
	poison(c.beta)
	poison(c.g)
	GDNGates(c.beta, c.g, b, a, aLog, dtBias, n, hv)
	c.state = randVec(r, hv*dk*dv, 0.5)
	return c
}

func (c *deltaCase) q() []float32 { return c.qkv }
func (c *deltaCase) k() []float32 { return c.qkv[c.hk*c.dk:] }
func (c *deltaCase) v() []float32 { return c.qkv[2*c.hk*c.dk:] }

// naiveDelta is SPEC §3 step 7 in float64 in its matrix form
// S_t = e^{g_t} (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ, o_t = S_tᵀ q_t.
func (c *deltaCase) naive() (out, state []float32) {
	o := make([]float64, c.n*c.hv*c.dv)
	st := f64(c.state)
	group := c.hv / c.hk
	for j := range c.hv {
		s := st[j*c.dk*c.dv:][:c.dk*c.dv]
		kh := j / group
		for t := range c.n {
			q := f64(c.q()[t*c.stride+kh*c.dk:][:c.dk])
			k := f64(c.k()[t*c.stride+kh*c.dk:][:c.dk])
			v := f64(c.v()[t*c.stride+j*c.dv:][:c.dv])
			beta, decay := float64(c.beta[t*c.hv+j]), math.Exp(float64(c.g[t*c.hv+j]))
			ks := make([]float64, c.dv) // kᵀS
			for a := range c.dk {
				for b := range c.dv {
					ks[b] += k[a] * s[a*c.dv+b]
				}
			}
			for a := range c.dk {
				for b := range c.dv {
					s[a*c.dv+b] = decay*(s[a*c.dv+b]-beta*k[a]*ks[b]) + beta*k[a]*v[b]
				}
			}
			for b := range c.dv {
				var sum float64
				for a := range c.dk {
					sum += s[a*c.dv+b] * q[a]
				}
				o[(t*c.hv+j)*c.dv+b] = sum
			}
		}
	}
	return f32(o), f32(st)
}

// run calls the recurrent (chunk 0) or the chunked kernel on tokens
// [from, to) with the given state, writing out rows [from, to).
func (c *deltaCase) run(out, state []float32, from, to, chunk int) {
	row := from * c.stride
	if chunk == 0 {
		GatedDeltaRecurrent(out[from*c.hv*c.dv:], c.q()[row:], c.k()[row:], c.v()[row:], c.stride,
			c.beta[from*c.hv:], c.g[from*c.hv:], state, to-from, c.hk, c.hv, c.dk, c.dv)
		return
	}
	GatedDeltaChunked(out[from*c.hv*c.dv:], c.q()[row:], c.k()[row:], c.v()[row:], c.stride,
		c.beta[from*c.hv:], c.g[from*c.hv:], state, to-from, c.hk, c.hv, c.dk, c.dv, chunk)
}

// call runs tokens [0, n) in one call and returns the outputs (with poisoned
// padding rows) and the final state.
func (c *deltaCase) call(chunk, pad int) (out, state []float32) {
	out = make([]float32, (c.n+pad)*c.hv*c.dv)
	poison(out)
	state = append([]float32(nil), c.state...)
	c.run(out, state, 0, c.n, chunk)
	return out, state
}

func TestGatedDeltaRecurrentHandComputed(t *testing.T) {
	// One head, dk = dv = 1: S = e^g S0 = 0.5·2 = 1; u = β(v − S·k) = 0.5(3 − 1) = 1;
	// S = 1 + k·u = 2; o = S·q = 4.
	state := []float32{2}
	out := []float32{0}
	qkv := []float32{2, 1, 3}
	GatedDeltaRecurrent(out, qkv, qkv[1:], qkv[2:], 3, []float32{0.5}, []float32{float32(math.Log(0.5))}, state, 1, 1, 1, 1, 1)
	if diff := cmp.Diff([]float32{4}, out, approx(0, 1e-6)); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float32{2}, state, approx(0, 1e-6)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestGatedDeltaRecurrent(t *testing.T) {
	const pad = 2
	for _, tt := range []struct{ n, hk, hv, dk, dv int }{
		{1, 1, 1, 4, 4},
		{7, 2, 4, 8, 8},   // grouped value heads: j uses key head j/2
		{20, 2, 2, 16, 8}, // dk ≠ dv
	} {
		t.Run(fmt.Sprintf("%+v", tt), func(t *testing.T) {
			c := newDeltaCase(20, tt.n, pad, tt.hk, tt.hv, tt.dk, tt.dv)
			wantOut, wantState := c.naive()
			out, state := c.call(0, pad)
			if diff := cmp.Diff(wantOut, out[:c.n*c.hv*c.dv], approx(1e-5, 1e-5)); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantState, state, approx(1e-5, 1e-5)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", out[c.n*c.hv*c.dv:])
		})
	}
}

func TestGatedDeltaChunkedMatchesRecurrent(t *testing.T) {
	const pad = 3
	for _, n := range []int{1, 5, 63, 64, 65, 130, 200} {
		for _, chunk := range []int{64, 16} {
			t.Run(fmt.Sprintf("n=%d/chunk=%d", n, chunk), func(t *testing.T) {
				c := newDeltaCase(uint64(30+n), n, pad, 2, 4, 16, 16)
				wantOut, wantState := c.call(0, pad)
				out, state := c.call(chunk, pad)
				if d := maxRelDiff(out[:n*c.hv*c.dv], wantOut[:n*c.hv*c.dv]); d > 1e-4 {
					t.Errorf("outputs: max relative difference %g > 1e-4", d)
				}
				if d := maxRelDiff(state, wantState); d > 1e-4 {
					t.Errorf("final state: max relative difference %g > 1e-4", d)
				}
				checkPoisoned(t, "rows ≥ n", out[n*c.hv*c.dv:])
			})
		}
	}
	t.Run("model head sizes", func(t *testing.T) {
		c := newDeltaCase(40, 70, pad, 1, 2, 128, 128)
		wantOut, wantState := c.call(0, pad)
		out, state := c.call(64, pad)
		if d := maxRelDiff(out[:c.n*c.hv*c.dv], wantOut[:c.n*c.hv*c.dv]); d > 1e-4 {
			t.Errorf("outputs: max relative difference %g > 1e-4", d)
		}
		if d := maxRelDiff(state, wantState); d > 1e-4 {
			t.Errorf("final state: max relative difference %g > 1e-4", d)
		}
	})
}

func TestGatedDeltaSplit(t *testing.T) {
	const n = 150
	for _, chunk := range []int{0, 64, 16} {
		c := newDeltaCase(50, n, 0, 2, 4, 16, 16)
		wholeOut, wholeState := c.call(chunk, 0)
		for _, a := range []int{1, 17, 64, 100} {
			out := make([]float32, n*c.hv*c.dv)
			state := append([]float32(nil), c.state...)
			c.run(out, state, 0, a, chunk)
			c.run(out, state, a, n, chunk)
			name := "recurrent"
			if chunk > 0 {
				name = fmt.Sprintf("chunked(%d)", chunk)
			}
			if chunk == 0 {
				// The recurrence is token by token: splitting changes nothing.
				if diff := cmp.Diff(wholeOut, out, exact); diff != "" {
					t.Errorf("%s split at %d: outputs (-one call +two calls):\n%s", name, a, diff)
				}
				if diff := cmp.Diff(wholeState, state, exact); diff != "" {
					t.Errorf("%s split at %d: state (-one call +two calls):\n%s", name, a, diff)
				}
				continue
			}
			if d := maxRelDiff(out, wholeOut); d > 1e-4 {
				t.Errorf("%s split at %d: outputs differ by %g", name, a, d)
			}
			if d := maxRelDiff(state, wholeState); d > 1e-4 {
				t.Errorf("%s split at %d: state differs by %g", name, a, d)
			}
		}
	}
}

// TestGatedDeltaPrefillThenDecode runs a chunked prefill followed by
// token-by-token decode steps, as the runtime does, against one recurrence.
func TestGatedDeltaPrefillThenDecode(t *testing.T) {
	const n, prompt = 80, 70
	c := newDeltaCase(55, n, 0, 2, 4, 16, 16)
	wantOut, wantState := c.call(0, 0)
	out := make([]float32, n*c.hv*c.dv)
	state := append([]float32(nil), c.state...)
	c.run(out, state, 0, prompt, 64)
	for tok := prompt; tok < n; tok++ {
		c.run(out, state, tok, tok+1, 0)
	}
	if d := maxRelDiff(out, wantOut); d > 1e-4 {
		t.Errorf("outputs differ by %g", d)
	}
	if d := maxRelDiff(state, wantState); d > 1e-4 {
		t.Errorf("state differs by %g", d)
	}
}

func TestGatedDeltaParallelMatchesSerial(t *testing.T) {
	c := newDeltaCase(60, 40, 1, 2, 8, 8, 8)
	chunks := []int{0, 16}
	var serialOut, serialState [][]float32
	for _, chunk := range chunks {
		out, state := c.call(chunk, 1)
		serialOut, serialState = append(serialOut, out), append(serialState, state)
	}
	forceParallel(t)
	for i, chunk := range chunks {
		out, state := c.call(chunk, 1)
		if diff := cmp.Diff(serialOut[i], out, exact); diff != "" {
			t.Errorf("chunk %d: outputs (-serial +parallel):\n%s", chunk, diff)
		}
		if diff := cmp.Diff(serialState[i], state, exact); diff != "" {
			t.Errorf("chunk %d: state (-serial +parallel):\n%s", chunk, diff)
		}
	}
}
