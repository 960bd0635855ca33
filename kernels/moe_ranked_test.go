package kernels_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

func init() {
	examples[ir.RMSNormRouterTopK] = routerTopKParams(12, 5, 1, 2, 3)
	examples[ir.MoEDecodeGateUpRanked] = moeGateUpParams(4, 8, 4, 2, 6, 2, 4)
}

// routerTopKParams are rmsnorm_router_topk's parameters: the router's
// rmsnorm_gemv (width k, n experts) ranking top-k.
func routerTopKParams(k, n, rpw, split, topK int64) ir.Params {
	p := rmsnormGEMVParams(k, n, rpw, split)
	p.SetFlag("early", false)
	p.SetInt("top_k", topK)
	return p
}

// TestMoERankedComposed holds the ranked pair — rmsnorm_router_topk, then
// moe_decode_gate_up_ranked — to the pair it replaces (rmsnorm_gemv, then
// moe_decode_gate_up ranking in its blocks), each run through its own
// declaration: logits, the normed row, ids, weights and act equal bit for
// bit, one row and three, at odd sizes and the tiny fixtures'; the
// arrival count leaves each launch flipped by 2³¹.
func TestMoERankedComposed(t *testing.T) {
	sizes := []struct{ experts, hidden, inter, k, shared int }{
		{5, 20, 6, 3, 10},
		{16, 64, 32, 4, 32},
		{8, 64, 32, 2, 32},
		{7, 16, 5, 1, 3},
		{40, 264, 24, 8, 8},
	}
	for _, sz := range sizes {
		for _, rows := range []int{1, 3} {
			r := rand.New(rand.NewPCG(uint64(sz.experts*100+rows), 17))
			E, H, I, K, S := sz.experts, sz.hidden, sz.inter, sz.k, sz.shared
			x, nw := normals(r, rows*H, 1), normals(r, H, 0.2)
			router, gateUp := normalsBF16(r, E*H, 0.3), normalsBF16(r, E*2*I*H, 0.1)
			sg, su := normalsBF16(r, S*H, 0.1), normalsBF16(r, S*H, 0.1)

			norm := rmsnormGEMVParams(int64(H), int64(E), 1, 1)
			xn, logits := make([]float32, rows*H), make([]float32, rows*E)
			runOps(t, ir.RMSNormGEMV, norm, rows, map[string][]byte{"y": mem(logits), "x": mem(x), "norm_w": mem(nw), "w": mem(router), "xn": mem(xn)})
			p := moeGateUpParams(int64(E), int64(H), int64(I), int64(K), int64(S), 1, 1)
			ids, w, act := make([]int32, rows*K), make([]float32, rows*K), make([]float32, rows*(K*I+S))
			runOps(t, ir.MoEDecodeGateUp, p, rows, map[string][]byte{"act": mem(act), "ids": mem(ids), "weights": mem(w),
				"x": mem(xn), "logits": mem(logits), "gate_up": mem(gateUp), "shared_gate": mem(sg), "shared_up": mem(su)})

			fXn, fLogits, fW, fAct := make([]float32, rows*H), make([]float32, rows*E), make([]float32, rows*K), make([]float32, rows*(K*I+S))
			for _, v := range [][]float32{fXn, fLogits, fW, fAct} {
				for i := range v {
					v[i] = float32(math.NaN())
				}
			}
			fIDs, count := make([]int32, rows*K), []int32{0}
			rank := map[string][]byte{"y": mem(fLogits), "x": mem(x), "norm_w": mem(nw), "w": mem(router), "xn": mem(fXn),
				"ids": mem(fIDs), "weights": mem(fW), "count": mem(count)}
			rp := routerTopKParams(int64(H), int64(E), 1, 1, int64(K))
			runOps(t, ir.RMSNormRouterTopK, rp, rows, rank)
			runOps(t, ir.MoEDecodeGateUpRanked, p, rows, map[string][]byte{"act": mem(fAct), "ids": mem(fIDs), "x": mem(fXn),
				"gate_up": mem(gateUp), "shared_gate": mem(sg), "shared_up": mem(su)})
			for _, c := range []struct {
				what      string
				got, want any
			}{{"xn", fXn, xn}, {"logits", fLogits, logits}, {"ids", fIDs, ids}, {"weights", fW, w}, {"act", fAct, act},
				{"count", uint32(count[0]), uint32(1) << 31}} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%+v rows %d: %s (-in gate_up +in the router):\n%s", sz, rows, c.what, diff)
				}
			}
			runOps(t, ir.RMSNormRouterTopK, rp, rows, rank)
			if count[0] != 0 {
				t.Errorf("%+v rows %d: count %#x after two launches, want 0", sz, rows, uint32(count[0]))
			}
		}
	}
}

// TestRouterTopKCount: a count with low bits set (a launch that did not
// finish) is refused, not run with a last block that would rank early.
func TestRouterTopKCount(t *testing.T) {
	f := kernels.Families[ir.RMSNormRouterTopK]
	p := examples[ir.RMSNormRouterTopK]
	for _, c := range []struct {
		count uint32
		err   string
	}{{0, ""}, {1 << 31, ""}, {5, "arrival count is 0x5"}, {1<<31 | 2, "arrival count is 0x80000002"}} {
		var block [ir.ParamSlots]int32
		a := bind(f, p, 1, &block)
		a.I32("count")[0] = int32(c.count)
		err := f.Reference(a)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("count %#x: %v, want %q", c.count, err, c.err)
		}
	}
}

// TestMoERankedChecks: the ranking's bounds (top-k within the router rows
// and a warp's lanes, the router rows within what one warp ranks) and
// early_ids only with the warp-per-slot layout.
func TestMoERankedChecks(t *testing.T) {
	cases := []struct {
		name string
		kind ir.Kind
		p    ir.Params
		err  string
	}{
		{"router real", ir.RMSNormRouterTopK, routerTopKParams(2048, 256, 1, 8, 8), ""},
		{"router top-k past the rows", ir.RMSNormRouterTopK, routerTopKParams(64, 4, 1, 1, 5), "top_k 5"},
		{"router top-k past the lanes", ir.RMSNormRouterTopK, routerTopKParams(64, 64, 1, 1, 33), "top_k 33"},
		{"router rows past a warp's ranking", ir.RMSNormRouterTopK, routerTopKParams(64, 513, 1, 1, 8), "n 513"},
		{"ranked gate_up real", ir.MoEDecodeGateUpRanked, moeGateUpParams(256, 2048, 512, 8, 512, 2, 4), ""},
		{"ranked gate_up loads", ir.MoEDecodeGateUpRanked, moeGateUpParams(256, 2048, 512, 8, 512, 4, 4), "loads"},
		{"down early ids", ir.MoEDecodeDown, earlyIDs(moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 8, 2), true)), ""},
		{"down early ids, warp per row", ir.MoEDecodeDown, earlyIDs(moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 1, 2), false)), "early_ids"},
	}
	for _, c := range cases {
		err := kernels.Families[c.kind].CheckParams(c.p)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: CheckParams = %v, want %q", c.name, err, c.err)
		}
	}
}

// earlyIDs is moe_decode_down's p reading its ids before the wait.
func earlyIDs(p ir.Params) ir.Params {
	p = p.Clone()
	p.SetFlag("early_ids", true)
	return p
}
