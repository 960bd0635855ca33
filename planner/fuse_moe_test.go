package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// moeFused applies the MoE rule to the op counts of a decode graph with
// layers MoE blocks: each block's nine launches after the router
// projection become moe_decode_gate_up and moe_decode_down.
func moeFused(counts map[ir.Kind]int, layers int) {
	for _, k := range moeChain {
		counts[k] -= layers
		if counts[k] == 0 {
			delete(counts, k)
		}
	}
	counts[ir.MoEDecodeGateUp] += layers
	counts[ir.MoEDecodeDown] += layers
}

// routerGraphs is graphsAfter with the router rule asked for
// (Options.MoERouter).
func routerGraphs(t *testing.T, m *Model, target plan.Target, f Fusion) map[string]*ir.Graph {
	t.Helper()
	gs, err := Graphs(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, Fusion: f, MoERouter: true}, "fuse")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ir.Graph{}
	for _, g := range gs {
		out[g.Name] = g
	}
	return out
}

// opNames are the tensor names an op binds, in operand order.
func opNames(g *ir.Graph, op *ir.Op) []string {
	var names []string
	for _, o := range op.Operands {
		names = append(names, g.Tensors[o.Tensor].Name)
	}
	return names
}

// TestFuseMoEDecode checks the rule: on the GPU targets' decode step every
// MoE block's nine launches after the router projection become the fused
// pair with the chain's operands, the intermediates go, the router
// projection stays; prefill keeps the chain; the cpu plan fuses only when
// forced; top-k past the slots the kernels stream keeps the chain.
func TestFuseMoEDecode(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	layers := m.Config.NumHiddenLayers
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		fused := graphsAfter(t, m, target, "fuse", FuseDefault)
		d := fused["decode"]
		if n := kindCounts(d); n[ir.MoEDecodeGateUp] != layers || n[ir.MoEDecodeDown] != layers || n[ir.RouterTopK] != 0 || n[ir.MoEDecodeRouteGateUp] != 0 {
			t.Errorf("%s: decode has %d gate_up, %d down, %d router_topk, %d route_gate_up; want %d, %d, 0, 0 (the router rule is off by default)", target,
				n[ir.MoEDecodeGateUp], n[ir.MoEDecodeDown], n[ir.RouterTopK], n[ir.MoEDecodeRouteGateUp], layers, layers)
		}
		for _, name := range []string{"moe_act", "moe_routed", "shared_gate", "shared_up", "shared_act", "shared_out", "shared_gate_logit"} {
			if d.Tensor(name) != nil {
				t.Errorf("%s: %s survives the fusion", target, name)
			}
		}
		p := "layers.0.mlp."
		for i, op := range d.Ops {
			if op.Layer != 0 {
				continue
			}
			switch op.Kind {
			case ir.MoEDecodeGateUp:
				want := []string{moeBlockAct, "router_ids", "router_weights", "xn", "router_logits", p + "experts.gate_up_proj",
					p + "shared_expert.gate_proj.weight", p + "shared_expert.up_proj.weight"}
				if diff := cmp.Diff(want, opNames(d, op)); diff != "" {
					t.Errorf("%s: gate_up operands (-want +got):\n%s", target, diff)
				}
				// The router projection right before it stays (with the
				// post-attention norm folded in where the norm rule runs).
				if prev := d.Ops[i-1]; (prev.Kind != ir.MatMul && prev.Kind != ir.RMSNormGEMV) || opNames(d, prev)[0] != "router_logits" {
					t.Errorf("%s: op before gate_up is %s %v, want the router matmul", target, prev.Kind, opNames(d, prev))
				}
				if d.Ops[i+1].Kind != ir.MoEDecodeDown {
					t.Errorf("%s: gate_up is followed by %s", target, d.Ops[i+1].Kind)
				}
			case ir.MoEDecodeDown:
				want := []string{"x", moeBlockAct, "router_ids", "router_weights", "xn", p + "experts.down_proj",
					p + "shared_expert.down_proj.weight", p + "shared_expert_gate.weight"}
				if diff := cmp.Diff(want, opNames(d, op)); diff != "" {
					t.Errorf("%s: down operands (-want +got):\n%s", target, diff)
				}
			}
		}
		if n := kindCounts(fused["prefill_4"]); n[ir.MoEDecodeGateUp] != 0 || n[ir.RouterTopK] != layers {
			t.Errorf("%s: prefill has %d moe_decode_gate_up, %d router_topk", target, n[ir.MoEDecodeGateUp], n[ir.RouterTopK])
		}
	}
	if n := kindCounts(graphsAfter(t, m, plan.CPU, "fuse", FuseDefault)["decode"])[ir.MoEDecodeGateUp]; n != 0 {
		t.Errorf("the cpu plan fuses %d MoE blocks by default", n)
	}
	if n := kindCounts(graphsAfter(t, m, plan.CPU, "fuse", FuseOn)["decode"])[ir.MoEDecodeDown]; n != layers {
		t.Errorf("the cpu plan with fusion on has %d moe_decode_down, want %d", n, layers)
	}
	if n := kindCounts(graphsAfter(t, m, plan.SM90, "fuse", FuseOff)["decode"])[ir.MoEDecodeGateUp]; n != 0 {
		t.Errorf("fusion off still fuses %d MoE blocks", n)
	}
	// Top-9 of 16 experts: more slots than the kernels stream at once.
	c := tinyConfig(t)
	c.NumExperts, c.NumExpertsPerTok = 16, 9
	wide := FromConfig("tiny", c)
	if n := kindCounts(graphsAfter(t, wide, plan.SM90, "fuse", FuseDefault)["decode"]); n[ir.MoEDecodeGateUp] != 0 || n[ir.RouterTopK] != layers {
		t.Errorf("top-9 fuses %d MoE blocks, keeps %d router_topk", n[ir.MoEDecodeGateUp], n[ir.RouterTopK])
	}
}

// TestFuseMoEDecodeRefuses leaves the chain alone when fusing would change
// what the graph computes.
func TestFuseMoEDecodeRefuses(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	lowered := func() *ir.Graph { return graphsAfter(t, m, plan.SM90, "lower", FuseOff)["decode"] }
	first := func(g *ir.Graph, k ir.Kind) int {
		for i, op := range g.Ops {
			if op.Kind == k {
				return i
			}
		}
		t.Fatalf("no %s", k)
		return -1
	}
	// at is the op n after the first router_topk.
	at := func(g *ir.Graph, n int) *ir.Op { return g.Ops[first(g, ir.RouterTopK)+n] }
	before := fuseMoEDecode(lowered())
	if before == 0 {
		t.Fatal("the lowered chain does not fuse")
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
	}{
		{"gate_up not on the top-k ids", func(g *ir.Graph) { at(g, 1).Operands[2] = at(g, 0).Operands[1] }},
		{"shared up of another row", func(g *ir.Graph) { at(g, 4).Operands[1] = at(g, 3).Operands[0] }},
		{"silu's inputs swapped", func(g *ir.Graph) {
			s := at(g, 5)
			s.Operands[1], s.Operands[2] = s.Operands[2], s.Operands[1]
		}},
		{"shared output read again", func(g *ir.Graph) {
			i := first(g, ir.SharedExpertCombine)
			extra := &ir.Op{Kind: ir.Add, Layer: g.Ops[i].Layer, Rows: g.Ops[i].Rows, Params: params(ints{"width": 16}),
				Operands: []ir.Operand{g.Ops[i].Operands[0], g.Ops[i].Operands[2]}}
			g.Ops = append(g.Ops[:i+1], append([]*ir.Op{extra}, g.Ops[i+1:]...)...)
		}},
		{"an op inside the chain", func(g *ir.Graph) {
			i := first(g, ir.SiLUMul)
			g.Ops = append(g.Ops[:i+1], append([]*ir.Op{g.Ops[i]}, g.Ops[i+1:]...)...)
		}},
		{"combine into the normed row", func(g *ir.Graph) { at(g, 8).Operands[0] = at(g, 1).Operands[1] }},
	}
	for _, tt := range tests {
		g := lowered()
		tt.modify(g)
		// The first layer's chain is modified; the others still fuse.
		if n := fuseMoEDecode(g); n != before-1 {
			t.Errorf("%s: fused %d chains, want %d", tt.name, n, before-1)
		}
	}
}

// TestStreamMoEDecodeParams pins the stream pass's launch parameters of the
// fused MoE block for the real model (the speed cases' choices): 2 rows
// per warp (2304 warps over the 4608 routed and shared rows) with unroll 4
// for gate_up, and for down, warp per slot, 8 rows a block with unroll 2
// (the 512-wide rows are 2 chunks a lane), on both targets.
func TestStreamMoEDecodeParams(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	type choice struct{ RowsPerWarp, Unroll int }
	want := map[plan.Target]map[ir.Kind]choice{
		plan.SM90:    {ir.MoEDecodeGateUp: {2, 4}, ir.MoEDecodeRouteGateUp: {2, 4}, ir.MoEDecodeDown: {8, 2}},
		plan.GFX1151: {ir.MoEDecodeGateUp: {2, 4}, ir.MoEDecodeRouteGateUp: {2, 4}, ir.MoEDecodeDown: {8, 2}},
	}
	// The fused router's grid: the 256 routed row groups, within two blocks
	// an SM on sm_90 (264), one a CU on gfx1151 (40).
	blocks := map[plan.Target]int{plan.SM90: 256, plan.GFX1151: 40}
	for target, w := range want {
		gs, err := Graphs(m, Options{Target: target, Buckets: []int{1024}, ContextTokens: 4096, MoERouter: true}, "stream")
		if err != nil {
			t.Fatal(err)
		}
		got := map[ir.Kind]choice{}
		for _, g := range gs {
			if g.Name != "decode" {
				continue
			}
			for _, op := range g.Ops {
				if op.Kind == ir.MoEDecodeRouteGateUp {
					if b := op.Params.Int("blocks"); b != blocks[target] {
						t.Errorf("%s: moe_decode_route_gate_up of %d blocks, want %d", target, b, blocks[target])
					}
				}
				for _, o := range append([]*ir.Op{op}, op.Fallback...) {
					if o.Kind == ir.MoEDecodeGateUp || o.Kind == ir.MoEDecodeDown || o.Kind == ir.MoEDecodeRouteGateUp {
						c := choice{o.Params.Int("rows_per_warp"), o.Params.Int("unroll")}
						if prev, ok := got[o.Kind]; ok && prev != c {
							t.Errorf("%s: %s differs between layers: %v, %v", target, o.Kind, prev, c)
						}
						got[o.Kind] = c
					}
				}
			}
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", target, diff)
		}
	}
}

// TestStreamMoEDecodeWarpPerSlot pins the stream pass's choice for each
// moe_decode_down layout on the real model: warp per slot, 8 rows a block
// (256 blocks), unroll 2, 16 loads in flight a lane; a warp owning its rows
// over all 8 experts, 1 row a warp on sm_90 with unroll 2 (256 blocks).
func TestStreamMoEDecodeWarpPerSlot(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		gs, err := Graphs(m, Options{Target: target, Buckets: []int{1024}, ContextTokens: 4096}, "fuse")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.Name != "decode" {
				continue
			}
			for _, perSlot := range []bool{true, false} {
				if !perSlot && target != plan.SM90 {
					continue
				}
				for _, op := range g.Ops {
					if op.Kind == ir.MoEDecodeDown {
						op.Params.SetFlag("warp_per_slot", perSlot)
					}
				}
				if err := streamOneRow(g, target, streamTable[target]); err != nil {
					t.Fatal(err)
				}
				want := [2]int{8, 2}
				if !perSlot {
					want = [2]int{1, 2}
				}
				for _, op := range g.Ops {
					if op.Kind != ir.MoEDecodeDown {
						continue
					}
					if got := [2]int{op.Params.Int("rows_per_warp"), op.Params.Int("unroll")}; got != want {
						t.Errorf("%s warp per slot %v: down rows and unroll %v, want %v", target, perSlot, got, want)
					}
					if s := kernels.Families[ir.MoEDecodeDown].Launch(op.Params, 1, target.Launch()); s.Grid[0] != 256 {
						t.Errorf("%s warp per slot %v: %d blocks, want 256", target, perSlot, s.Grid[0])
					}
				}
			}
		}
	}
}

// TestFuseMoERouter checks the router rule: off unless asked for; asked
// for, on the GPU targets' decode step each layer's router (rmsnorm_gemv) and moe_decode_gate_up become one
// moe_decode_route_gate_up on their operands and a per-layer barrier
// count, the pair kept as its fallback (the gate_up streaming as the
// fused op does); its grid is the routed row groups within the target's
// resident blocks; the cpu plan fuses only when forced, with the
// placeholder grid; and the plan carries the fallback's launches and
// kernels, which Validate requires.
func TestFuseMoERouter(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	layers := m.Config.NumHiddenLayers
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		if n := kindCounts(graphsAfter(t, m, target, "fuse", FuseDefault)["decode"])[ir.MoEDecodeRouteGateUp]; n != 0 {
			t.Errorf("%s: the router rule folds %d routers without being asked", target, n)
		}
		d := routerGraphs(t, m, target, FuseDefault)["decode"]
		seen := 0
		for _, op := range d.Ops {
			if op.Kind != ir.MoEDecodeRouteGateUp {
				continue
			}
			seen++
			p := fmt.Sprintf("layers.%d.", op.Layer)
			bar := fmt.Sprintf("state.%d.moe_barrier", op.Layer)
			want := []string{moeBlockAct, "router_ids", "router_weights", "router_logits", "xn", "x", p + "post_attention_layernorm.weight",
				p + "mlp.gate.weight", p + "mlp.experts.gate_up_proj", p + "mlp.shared_expert.gate_proj.weight",
				p + "mlp.shared_expert.up_proj.weight", bar}
			if diff := cmp.Diff(want, opNames(d, op)); diff != "" {
				t.Errorf("%s: operands (-want +got):\n%s", target, diff)
			}
			if b := d.Tensor(bar); b == nil || b.Role != ir.State || b.DType != ir.I32 || len(b.Shape) != 1 || b.Shape[0] != 1 {
				t.Errorf("%s: barrier count %+v, want one i32 of state", target, b)
			}
			if len(op.Fallback) != 2 || op.Fallback[0].Kind != ir.RMSNormGEMV || op.Fallback[1].Kind != ir.MoEDecodeGateUp {
				t.Fatalf("%s: fallback %v, want rmsnorm_gemv then moe_decode_gate_up", target, op.Fallback)
			}
			pp, gp := op.Params, op.Fallback[1].Params
			if pp.Int("rows_per_warp") != gp.Int("rows_per_warp") || pp.Int("unroll") != gp.Int("unroll") {
				t.Errorf("%s: the fallback's gate_up streams %v, the fused op %v", target, gp, pp)
			}
			groups := pp.Int("k") * ir.Ceil(pp.Int("inter"), target.Launch().Warps()*pp.Int("rows_per_warp"))
			if want := min(groups, moeRouteResident[target]*target.Launch().Multiprocessors); pp.Int("blocks") != want {
				t.Errorf("%s: %d blocks, want %d (the routed row groups)", target, pp.Int("blocks"), want)
			}
		}
		if seen != layers {
			t.Errorf("%s: %d moe_decode_route_gate_up, want %d", target, seen, layers)
		}
	}
	if n := kindCounts(routerGraphs(t, m, plan.CPU, FuseDefault)["decode"])[ir.MoEDecodeRouteGateUp]; n != 0 {
		t.Errorf("the cpu plan fuses %d routers without fusion", n)
	}
	for _, op := range routerGraphs(t, m, plan.CPU, FuseOn)["decode"].Ops {
		if op.Kind == ir.MoEDecodeRouteGateUp {
			if b := op.Params.Int("blocks"); b != max(op.Params.Int("experts"), op.Params.Int("shared_inter")) {
				t.Errorf("cpu: %d blocks, want the placeholder", b)
			}
		}
	}

	p, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64, MoERouter: true})
	if err != nil {
		t.Fatal(err)
	}
	kernelNames := map[string]bool{}
	for _, k := range p.Kernels {
		kernelNames[k.Name] = true
	}
	var fused *plan.Launch
	for pi := range p.Phases {
		for li := range p.Phases[pi].Launches {
			l := &p.Phases[pi].Launches[li]
			if len(l.Fallback) == 0 {
				continue
			}
			fused = l
			for _, fb := range l.Fallback {
				if !kernelNames[fb.Kernel] || len(fb.Grid) != 3 {
					t.Errorf("fallback launch %s: kernel listed %v, grid %v", fb.Kernel, kernelNames[fb.Kernel], fb.Grid)
				}
			}
		}
	}
	if fused == nil {
		t.Fatal("no launch of the sm_90 plan has a fallback")
	}
	fused.Fallback = nil
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "has no fallback launches") {
		t.Errorf("a grid-barrier launch without its fallback validates: %v", err)
	}
}

// TestFuseMoERouterRefuses keeps the router and gate_up apart when the
// gate_up does not read the router's logits and normed row, or another op
// stands between them.
func TestFuseMoERouterRefuses(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	fusedOnce := func() *ir.Graph {
		// The graph after the fuse pass with the router rule undone.
		g := graphsAfter(t, m, plan.SM90, "fuse", FuseDefault)["decode"]
		var ops []*ir.Op
		for _, op := range g.Ops {
			if op.Kind == ir.MoEDecodeRouteGateUp {
				ops = append(ops, op.Fallback...)
				continue
			}
			ops = append(ops, op)
		}
		g.Ops = ops
		return g
	}
	before := fuseMoERouter(fusedOnce(), plan.SM90)
	if before == 0 {
		t.Fatal("the undone graph does not fuse again")
	}
	first := func(g *ir.Graph, k ir.Kind) int {
		for i, op := range g.Ops {
			if op.Kind == k {
				return i
			}
		}
		t.Fatalf("no %s", k)
		return -1
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
	}{
		{"gate_up on other logits", func(g *ir.Graph) {
			i := first(g, ir.MoEDecodeGateUp)
			g.Ops[i].Operands[4] = g.Ops[i].Operands[0]
		}},
		{"gate_up on the un-normed row", func(g *ir.Graph) {
			i := first(g, ir.MoEDecodeGateUp)
			g.Ops[i].Operands[3] = g.Ops[i-1].Operands[1]
		}},
		{"an op between them", func(g *ir.Graph) {
			i := first(g, ir.MoEDecodeGateUp)
			g.Ops = append(g.Ops[:i], append([]*ir.Op{g.Ops[i+1]}, g.Ops[i:]...)...)
		}},
	}
	for _, tt := range tests {
		g := fusedOnce()
		tt.modify(g)
		if n := fuseMoERouter(g, plan.SM90); n != before-1 {
			t.Errorf("%s: fused %d, want %d", tt.name, n, before-1)
		}
	}
}
