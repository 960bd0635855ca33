package kernels_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

func init() {
	examples[ir.MoEDecodeRouteGateUp] = moeRouteParams(moeDecodeParams(4, 8, 4, 2, 6, 2, 4), 3)
}

// moeRouteParams are moe_decode_gate_up's parameters p with the router's
// norm (1 + w, eps 1e-6) and a grid of blocks.
func moeRouteParams(p ir.Params, blocks int64) ir.Params {
	p = p.Clone()
	p.SetInt("blocks", blocks)
	p.SetReal("eps", 1e-6)
	p.SetFlag("one_plus", true)
	return p
}

// TestMoEDecodeRouteComposed holds moe_decode_route_gate_up's reference to
// the three launches it replaces, each run through its own declaration
// (rmsnorm, the router matmul, moe_decode_gate_up): logits, the normed row,
// ids, weights and act equal bit for bit, one row and three, at odd sizes;
// and the barrier count leaves each launch flipped by 2³¹.
func TestMoEDecodeRouteComposed(t *testing.T) {
	sizes := []struct{ experts, hidden, inter, k, shared int }{
		{5, 20, 6, 3, 10},
		{16, 64, 32, 4, 32},
		{8, 64, 32, 2, 32},
		{7, 16, 5, 1, 3},
	}
	for _, sz := range sizes {
		for _, rows := range []int{1, 3} {
			r := rand.New(rand.NewPCG(uint64(sz.experts*100+rows), 11))
			E, H, I, K, S := sz.experts, sz.hidden, sz.inter, sz.k, sz.shared
			x, nw := normals(r, rows*H, 1), normals(r, H, 0.2)
			router, gateUp := normalsBF16(r, E*H, 0.3), normalsBF16(r, E*2*I*H, 0.1)
			sg, su := normalsBF16(r, S*H, 0.1), normalsBF16(r, S*H, 0.1)
			ints := func(m map[string]int64) ir.Params { return ir.Params{Ints: m} }

			xn, logits := make([]float32, rows*H), make([]float32, rows*E)
			norm := ints(map[string]int64{"width": int64(H), "heads": 1, "x_stride": int64(H), "y_stride": int64(H)})
			norm.SetReal("eps", 1e-6)
			norm.SetFlag("one_plus", true)
			runOps(t, ir.RMSNorm, norm, rows, map[string][]byte{"y": mem(xn), "x": mem(x), "w": mem(nw)})
			runOps(t, ir.MatMul, ints(map[string]int64{"k": int64(H), "n": int64(E)}), rows,
				map[string][]byte{"y": mem(logits), "x": mem(xn), "w": mem(router)})
			p := moeGateUpParams(int64(E), int64(H), int64(I), int64(K), int64(S), 1, 1)
			ids, w, act := make([]int32, rows*K), make([]float32, rows*K), make([]float32, rows*(K*I+S))
			runOps(t, ir.MoEDecodeGateUp, p, rows, map[string][]byte{"act": mem(act), "ids": mem(ids), "weights": mem(w),
				"x": mem(xn), "logits": mem(logits), "gate_up": mem(gateUp), "shared_gate": mem(sg), "shared_up": mem(su)})

			fXn, fLogits := make([]float32, rows*H), make([]float32, rows*E)
			fIDs, fW, fAct := make([]int32, rows*K), make([]float32, rows*K), make([]float32, rows*(K*I+S))
			for _, v := range [][]float32{fXn, fLogits, fAct} {
				for i := range v {
					v[i] = float32(math.NaN())
				}
			}
			bar := []int32{0}
			fused := map[string][]byte{"act": mem(fAct), "ids": mem(fIDs), "weights": mem(fW), "logits": mem(fLogits), "xn": mem(fXn),
				"x": mem(x), "norm_w": mem(nw), "router": mem(router), "gate_up": mem(gateUp), "shared_gate": mem(sg),
				"shared_up": mem(su), "barrier": mem(bar)}
			runOps(t, ir.MoEDecodeRouteGateUp, moeRouteParams(p, 5), rows, fused)
			for _, c := range []struct {
				what      string
				got, want any
			}{{"xn", fXn, xn}, {"logits", fLogits, logits}, {"ids", fIDs, ids}, {"weights", fW, w}, {"act", fAct, act},
				{"barrier", uint32(bar[0]), uint32(1) << 31}} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%+v rows %d: %s (-unfused +fused):\n%s", sz, rows, c.what, diff)
				}
			}
			// The next launch flips the count back.
			runOps(t, ir.MoEDecodeRouteGateUp, moeRouteParams(p, 5), rows, fused)
			if bar[0] != 0 {
				t.Errorf("%+v rows %d: barrier count %#x after two launches, want 0", sz, rows, uint32(bar[0]))
			}
		}
	}
}

// TestMoEDecodeRouteBarrierCount: a count with low bits set (a launch that
// did not finish) is refused, not run with a barrier that would release
// early.
func TestMoEDecodeRouteBarrierCount(t *testing.T) {
	f := kernels.Families[ir.MoEDecodeRouteGateUp]
	p := examples[ir.MoEDecodeRouteGateUp]
	for _, c := range []struct {
		count uint32
		err   string
	}{{0, ""}, {1 << 31, ""}, {3, "barrier count is 0x3"}, {1<<31 | 7, "barrier count is 0x80000007"}} {
		var block [ir.ParamSlots]int32
		a := bind(f, p, 2, &block)
		a.I32("barrier")[0] = int32(c.count)
		err := f.Reference(a)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("count %#x: %v, want %q", c.count, err, c.err)
		}
	}
}

// TestMoEDecodeRouteChecks refuses what the template cannot run.
func TestMoEDecodeRouteChecks(t *testing.T) {
	real := moeDecodeParams(256, 2048, 512, 8, 512, 2, 4)
	cases := []struct {
		name string
		p    ir.Params
		err  string
	}{
		{"real, 256 blocks", moeRouteParams(real, 256), ""},
		{"real, 40 blocks", moeRouteParams(real, 40), ""},
		{"tiny", moeRouteParams(moeDecodeParams(16, 64, 32, 4, 32, 1, 1), 64), ""},
		{"no blocks", moeRouteParams(real, 0), "parameter blocks is 0"},
		{"too few blocks", moeRouteParams(real, 8), "dots before the barrier"},
		{"hidden past shared memory", moeRouteParams(moeDecodeParams(16, 8200, 32, 4, 32, 1, 1), 64), "hidden 8200"},
		{"gate_up's checks", moeRouteParams(moeDecodeParams(256, 2048, 512, 8, 512, 4, 4), 256), "loads"},
		{"k past the experts", moeRouteParams(moeDecodeParams(4, 8, 4, 5, 4, 1, 1), 4), "exceeds"},
	}
	for _, c := range cases {
		err := kernels.Families[ir.MoEDecodeRouteGateUp].CheckParams(c.p)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: CheckParams = %v, want %q", c.name, err, c.err)
		}
	}
}

// TestMoEDecodeRouteLaunch: the grid is the blocks parameter by the rows
// on every GPU target, and the dots a block sums split the router and the
// shared expert over it.
func TestMoEDecodeRouteLaunch(t *testing.T) {
	p := moeRouteParams(moeDecodeParams(256, 2048, 512, 8, 512, 2, 4), 80)
	for _, tg := range plan.GPUTargets() {
		if s := kernels.Families[ir.MoEDecodeRouteGateUp].Launch(p, 2, tg.Launch()); s.Grid != [3]int{80, 2, 1} || s.SharedBytes != 0 {
			t.Errorf("%s: launch %+v, want grid 80 × 2, no dynamic shared memory", tg, s)
		}
	}
	if r, s := kernels.MoEDecodeRouteDots(p); r != 4 || s != 7 {
		t.Errorf("dots of 80 blocks: %d router, %d shared rows, want 4 and 7", r, s)
	}
}
