package planner

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// rankOnce turns target's RankOnce on for the test.
func rankOnce(t *testing.T, target plan.Target) {
	t.Helper()
	tune := streamTable[target]
	old := tune
	tune.RankOnce = true
	streamTable[target] = tune
	t.Cleanup(func() { streamTable[target] = old })
}

// TestFuseMoERank checks the ranking rule: off where the target's row does
// not ask for it; asked for, every decode MoE block of the tiny model
// becomes rmsnorm_router_topk (the router's operands, the block's ids and
// weights and a per-layer count of state), moe_decode_gate_up_ranked on
// those ids, and moe_decode_down with early_ids; after every pass the ids'
// writer is the launch two before each early reader and the launch just
// before writes none of its operands' ids (what programmatic launch lets a
// kernel read before its wait); the plan validates; prefill keeps the
// unfused chain.
func TestFuseMoERank(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	layers := m.Config.NumHiddenLayers
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		if !streamTable[target].RankOnce {
			if n := kindCounts(graphsAfter(t, m, target, "fuse", FuseDefault)["decode"])[ir.RMSNormRouterTopK]; n != 0 {
				t.Errorf("%s: the rank rule fires %d times without the target's row asking", target, n)
			}
		}
	}
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		t.Run(string(target), func(t *testing.T) {
			rankOnce(t, target)
			gs := graphsAfter(t, m, target, "configure", FuseDefault)
			d := gs["decode"]
			n := kindCounts(d)
			if n[ir.RMSNormRouterTopK] != layers || n[ir.MoEDecodeGateUpRanked] != layers || n[ir.MoEDecodeGateUp] != 0 {
				t.Errorf("%d rmsnorm_router_topk, %d moe_decode_gate_up_ranked, %d moe_decode_gate_up; want %d, %d, 0",
					n[ir.RMSNormRouterTopK], n[ir.MoEDecodeGateUpRanked], n[ir.MoEDecodeGateUp], layers, layers)
			}
			for i, op := range d.Ops {
				switch op.Kind {
				case ir.RMSNormRouterTopK:
					p := fmt.Sprintf("layers.%d.", op.Layer)
					count := fmt.Sprintf("state.%d.moe_rank", op.Layer)
					want := []string{"router_logits", "x", p + "post_attention_layernorm.weight", p + "mlp.gate.weight", "xn",
						"router_ids", "router_weights", count}
					if diff := cmp.Diff(want, opNames(d, op)); diff != "" {
						t.Errorf("router topk operands (-want +got):\n%s", diff)
					}
					if c := d.Tensor(count); c == nil || c.Role != ir.State || c.DType != ir.I32 || len(c.Shape) != 1 || c.Shape[0] != 1 {
						t.Errorf("count %+v, want one i32 of state", c)
					}
					if k := op.Params.Int("top_k"); k != m.Config.NumExpertsPerTok {
						t.Errorf("top_k %d, want the model's %d", k, m.Config.NumExpertsPerTok)
					}
				case ir.MoEDecodeDown:
					if !op.Params.Flag("early_ids") {
						t.Errorf("layer %d: moe_decode_down without early_ids", op.Layer)
						continue
					}
					ids := op.Operands[kernels.Families[ir.MoEDecodeDown].Operand("ids")].Tensor
					if i < 2 || !writes(d, i-2, ids) || writes(d, i-1, ids) {
						t.Errorf("layer %d: the ids' writer is not the launch two before moe_decode_down (%s, %s)", op.Layer, d.Ops[i-2].Kind, d.Ops[i-1].Kind)
					}
				}
			}
			if k := kindCounts(gs["prefill_4"]); k[ir.RMSNormRouterTopK] != 0 || k[ir.RouterTopK] != layers {
				t.Errorf("prefill: %d rmsnorm_router_topk, %d router_topk", k[ir.RMSNormRouterTopK], k[ir.RouterTopK])
			}
			if _, err := Plan(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFuseMoERankRefuses: the rule leaves a block alone when down is not
// the op right after gate_up (nothing may stand between the ids' writer
// and their early reader but gate_up), when down has the warp-per-row
// layout (no early ids there), and when gate_up does not read the router's
// logits.
func TestFuseMoERankRefuses(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	rankOnce(t, plan.SM90)
	edits := []struct {
		name string
		edit func(g *ir.Graph, i int)
	}{
		{"none (the undone graph ranks again)", func(*ir.Graph, int) {}},
		{"op between gate_up and down", func(g *ir.Graph, i int) {
			g.Ops[i+1], g.Ops[i+2] = g.Ops[i+2], g.Ops[i+1] // down before gate_up: no longer the pattern's order
		}},
		{"warp per row", func(g *ir.Graph, i int) {
			p := g.Ops[i+2].Params.Clone()
			p.SetFlag("warp_per_slot", false)
			g.Ops[i+2].Params = p
		}},
		{"other logits", func(g *ir.Graph, i int) {
			g.Ops[i+1].Operands[4] = g.Ops[i+1].Operands[3] // gate_up reads the normed row as its logits
		}},
	}
	for _, e := range edits {
		fused := graphsAfter(t, m, plan.SM90, "fuse", FuseDefault)["decode"]
		// Undo the rank rule on a fused graph, edit, and run the rule again.
		for i := 0; i+2 < len(fused.Ops); i++ {
			if fused.Ops[i].Kind != ir.RMSNormRouterTopK {
				continue
			}
			fused.Ops[i], fused.Ops[i+1] = unrank(fused, fused.Ops[i], fused.Ops[i+1])
			p := fused.Ops[i+2].Params.Clone()
			p.SetFlag("early_ids", false)
			fused.Ops[i+2].Params = p
			e.edit(fused, i)
		}
		want := 0
		if e.name[:4] == "none" {
			want = m.Config.NumHiddenLayers
		}
		if n := fuseMoERank(fused, true); n != want {
			t.Errorf("%s: the rule fired %d times, want %d", e.name, n, want)
		}
	}
}

// unrank is the pair the rank rule replaced: the router's rmsnorm_gemv
// and moe_decode_gate_up on its logits.
func unrank(g *ir.Graph, router, gu *ir.Op) (*ir.Op, *ir.Op) {
	p := router.Params.Clone()
	delete(p.Ints, "top_k")
	nm := &ir.Op{Kind: ir.RMSNormGEMV, Layer: router.Layer, Rows: router.Rows, Params: p, Operands: router.Operands[:5]}
	ids, w := router.Operands[5], router.Operands[6]
	gate := &ir.Op{Kind: ir.MoEDecodeGateUp, Layer: gu.Layer, Rows: gu.Rows, Params: gu.Params,
		Operands: []ir.Operand{gu.Operands[0], ids, w, gu.Operands[2], router.Operands[0], gu.Operands[3], gu.Operands[4], gu.Operands[5]}}
	return nm, gate
}

// TestL2PrefetchFlags checks where the stream row's L2Prefetch puts the
// kernels' l2_prefetch flag in the real model's sm_90 decode step: on
// every weight projection of one wave (qkv|z|b|a, q|k|v, the output
// projections, the router) and on gate_up's shared expert, not on the
// LM head (1 GB, many waves); off everywhere while the row leaves it off,
// and the plan validates either way.
func TestL2PrefetchFlags(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	for _, on := range []bool{false, true} {
		tune := streamTable[plan.SM90]
		old := tune
		tune.L2Prefetch = on
		streamTable[plan.SM90] = tune
		d := graphsAfter(t, m, plan.SM90, "configure", FuseDefault)["decode"]
		got := map[string]bool{}
		for _, op := range d.Ops {
			switch op.Kind {
			case ir.RMSNormGEMV, ir.GEMVAdd, ir.GEMV:
				got[fmt.Sprintf("%s n=%d", op.Kind, op.Params.Int("n"))] = op.Params.Flag("l2_prefetch")
			case ir.MoEDecodeGateUp:
				got[string(op.Kind)] = op.Params.Flag("l2_prefetch")
			}
		}
		want := map[string]bool{"rmsnorm_gemv n=12352": on, "rmsnorm_gemv n=9216": on, "rmsnorm_gemv n=256": on,
			"rmsnorm_gemv n=248320": false, "gemv_add n=2048": on, "moe_decode_gate_up": on}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("L2Prefetch %v: l2_prefetch by launch (-want +got):\n%s", on, diff)
		}
		if _, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{16}, ContextTokens: 64}); err != nil {
			t.Errorf("L2Prefetch %v: %v", on, err)
		}
		streamTable[plan.SM90] = old
	}
}

// TestLateTriggerFlags pins where --late-trigger and --gdn-early-state
// apply on the real model's decode step: late_trigger on every streaming
// launch (the gemv families, the LM head included, both MoE launches) and
// on gdn_decode_split, early_state on the split only; on sm_90 only (the
// gfx1151 plan has no programmatic launch), and absent without the options.
func TestLateTriggerFlags(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	decode := func(o Options) *ir.Graph { return decodeAfter(t, m, o, "configure") }
	flags := func(g *ir.Graph) map[string][2]bool {
		got := map[string][2]bool{}
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.RMSNormGEMV, ir.GEMVAdd, ir.GEMV:
				got[fmt.Sprintf("%s n=%d", op.Kind, op.Params.Int("n"))] = [2]bool{op.Params.Flag("late_trigger"), op.Params.Flag("early_state")}
			case ir.MoEDecodeGateUp, ir.MoEDecodeDown, ir.GDNDecodeSplit:
				got[string(op.Kind)] = [2]bool{op.Params.Flag("late_trigger"), op.Params.Flag("early_state")}
			}
		}
		return got
	}
	on := [2]bool{true, false}
	want := map[string][2]bool{"rmsnorm_gemv n=12352": on, "rmsnorm_gemv n=9216": on, "rmsnorm_gemv n=256": on,
		"rmsnorm_gemv n=248320": on, "gemv_add n=2048": on, "moe_decode_gate_up": on, "moe_decode_down": on,
		"gdn_decode_split": {true, true}}
	if diff := cmp.Diff(want, flags(decode(Options{Target: plan.SM90, LateTrigger: true, GDNEarlyState: true}))); diff != "" {
		t.Errorf("sm_90: late_trigger, early_state by launch (-want +got):\n%s", diff)
	}
	for _, o := range []Options{{Target: plan.SM90}, {Target: plan.GFX1151, LateTrigger: true, GDNEarlyState: true}} {
		for k, f := range flags(decode(o)) {
			if f != [2]bool{} {
				t.Errorf("%s (late trigger %v): %s has late_trigger, early_state %v", o.Target, o.LateTrigger, k, f)
			}
		}
	}
}
