package kernels

import (
	"fmt"
	"testing"

	"github.com/aimaproject/aimac/ir"
)

// wy runs gated_delta_wy then gated_delta_state on tokens [from, to) of c,
// as the prefill's two launches do, writing out rows [from, to).
func (c *deltaCase) wy(out, state []float32, from, to, chunk int) {
	n := to - from
	row := from * c.stride
	w := make([]float32, n*c.hv*c.dk)
	qw := make([]float32, n*c.hv*c.dk)
	kd := make([]float32, n*c.hv*c.dk)
	u := make([]float32, n*c.hv*c.dv)
	gc := make([]float32, n*c.hv)
	o := out[from*c.hv*c.dv:]
	GatedDeltaWY(w, qw, kd, u, gc, o, c.q()[row:], c.k()[row:], c.v()[row:], c.stride,
		c.beta[from*c.hv:], c.g[from*c.hv:], n, c.hk, c.hv, c.dk, c.dv, chunk)
	GatedDeltaState(o, state, w, qw, kd, u, gc, n, c.hv, c.dk, c.dv, chunk)
}

// TestGatedDeltaWYMatchesRecurrent holds the two launches to the
// token-by-token recurrence at every chunk edge: lengths 1, 63, 64, 65 and
// 200 (a ragged tail), chunks 64 and 16, from the case's non-zero state
// (a prefill after a prefill), the tiny fixtures' heads and the model's.
// Both are f32 throughout; they differ by the order of the sums only (the
// chunked form sums each product over up to 64 tokens at once), so the
// bound is the one gated_delta_chunked is held to: 1e-4 of the largest
// value.
func TestGatedDeltaWYMatchesRecurrent(t *testing.T) {
	const pad = 3
	for _, tt := range []struct{ n, chunk, hk, hv, dk, dv int }{
		{1, 64, 2, 4, 16, 16},
		{63, 64, 2, 4, 16, 16},
		{64, 64, 2, 4, 16, 16},
		{65, 64, 2, 4, 16, 16},
		{200, 64, 2, 4, 16, 16},
		{200, 16, 2, 4, 16, 16},
		{130, 64, 1, 3, 32, 16}, // a group of three, dk ≠ dv
		{70, 64, 1, 2, 128, 128},
	} {
		t.Run(fmt.Sprintf("%+v", tt), func(t *testing.T) {
			c := newDeltaCase(uint64(60+tt.n), tt.n, pad, tt.hk, tt.hv, tt.dk, tt.dv)
			want, wantState := c.call(0, pad)
			out := make([]float32, (tt.n+pad)*c.hv*c.dv)
			poison(out)
			state := append([]float32(nil), c.state...)
			c.wy(out, state, 0, tt.n, tt.chunk)
			if d := maxRelDiff(out[:tt.n*c.hv*c.dv], want[:tt.n*c.hv*c.dv]); d > 1e-4 {
				t.Errorf("outputs: max relative difference %g > 1e-4", d)
			}
			if d := maxRelDiff(state, wantState); d > 1e-4 {
				t.Errorf("final state: max relative difference %g > 1e-4", d)
			}
			checkPoisoned(t, "rows ≥ n", out[tt.n*c.hv*c.dv:])
		})
	}
}

// TestGatedDeltaWYSegments splits a prompt into segments (a cache hit's
// prefill continuing from the stored state) at and off chunk edges.
func TestGatedDeltaWYSegments(t *testing.T) {
	const n = 150
	c := newDeltaCase(70, n, 0, 2, 4, 16, 16)
	want, wantState := c.call(0, 0)
	for _, a := range []int{1, 63, 64, 65, 100} {
		out := make([]float32, n*c.hv*c.dv)
		state := append([]float32(nil), c.state...)
		c.wy(out, state, 0, a, 64)
		c.wy(out, state, a, n, 64)
		if d := maxRelDiff(out, want); d > 1e-4 {
			t.Errorf("split at %d: outputs differ by %g", a, d)
		}
		if d := maxRelDiff(state, wantState); d > 1e-4 {
			t.Errorf("split at %d: state differs by %g", a, d)
		}
	}
}

// TestGDNChunkFLOPs checks the FLOP count against its terms at the model's
// sizes (docs/prefill-gdn.md): 8K tokens are 128 chunks of 32 value heads.
func TestGDNChunkFLOPs(t *testing.T) {
	p := ir.Params{Ints: map[string]int64{"k_dim": 128, "v_dim": 128, "v_heads": 32, "chunk": 64}}
	wy, state := GDNChunkFLOPs(p, 8192)
	if want := int64(128 * 32 * (4*64*64*128 + 4*64*64*256)); wy != want {
		t.Errorf("gated_delta_wy: %d flops, want %d", wy, want)
	}
	if want := int64(128 * 32 * 6 * 64 * 128 * 128); state != want {
		t.Errorf("gated_delta_state: %d flops, want %d", state, want)
	}
}
