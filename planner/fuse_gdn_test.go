package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// gdnFitConfig is the planner's tiny model with the tiny fixtures' GDN
// sizes (2 key heads, 4 value heads, head dims 16), which the fused
// template runs.
func gdnFitConfig(t *testing.T) *arch.Config {
	t.Helper()
	c, err := arch.ParseConfig([]byte(`{"model_type":"qwen3_5_moe","text_config":{"model_type":"qwen3_5_moe_text",
	"hidden_size":16,"num_hidden_layers":4,"vocab_size":40,"num_attention_heads":2,"num_key_value_heads":1,
	"head_dim":8,"linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":16,
	"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,
	"shared_expert_intermediate_size":8,"rope_parameters":{"rope_theta":10000,"partial_rotary_factor":0.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kindCounts(g *ir.Graph) map[ir.Kind]int {
	n := map[ir.Kind]int{}
	for _, op := range g.Ops {
		n[op.Kind]++
	}
	return n
}

// graphsAfter is every step's graph after pass, by name.
func graphsAfter(t *testing.T, m *Model, target plan.Target, after string, f Fusion) map[string]*ir.Graph {
	t.Helper()
	gs, err := Graphs(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, Fusion: f}, after)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ir.Graph{}
	for _, g := range gs {
		out[g.Name] = g
	}
	return out
}

// TestFuseGDNDecode checks the rule: on the GPU targets' decode step every
// GDN layer's six-launch chain becomes one gdn_decode_split with the chain's
// operands, its intermediates go, and nothing else changes; prefill keeps
// the chunked chain; the cpu plan fuses only when forced; shapes the
// template does not run keep the chain on the GPU targets.
func TestFuseGDNDecode(t *testing.T) {
	m := FromConfig("tiny", gdnFitConfig(t))
	gdnLayers := 0
	for i := range m.Config.NumHiddenLayers {
		if !m.Config.IsFullAttention(i) {
			gdnLayers++
		}
	}
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		lowered := kindCounts(graphsAfter(t, m, target, "lower", FuseDefault)["decode"])
		fused := graphsAfter(t, m, target, "fuse", FuseDefault)
		want := lowered
		for _, k := range gdnChain {
			want[k] -= gdnLayers
			if want[k] == 0 {
				delete(want, k)
			}
		}
		want[ir.GDNDecodeSplit] = gdnLayers
		want[ir.MatMul] -= m.Config.NumHiddenLayers
		want[ir.MatMulAdd] = m.Config.NumHiddenLayers
		delete(want, ir.Add)
		qkFused(want)
		moeFused(want, m.Config.NumHiddenLayers)
		foldedByOtherRules(want, m.Config, true)
		if diff := cmp.Diff(want, kindCounts(fused["decode"])); diff != "" {
			t.Errorf("%s: fused decode op counts (-want +got):\n%s", target, diff)
		}
		for _, name := range []string{"gdn_conv", "gdn_beta", "gdn_g", "gdn_o"} {
			if fused["decode"].Tensor(name) != nil {
				t.Errorf("%s: %s survives the fusion", target, name)
			}
		}
		for _, op := range fused["decode"].Ops {
			if op.Kind != ir.GDNDecodeSplit {
				continue
			}
			var names []string
			for _, o := range op.Operands {
				names = append(names, fused["decode"].Tensors[o.Tensor].Name)
			}
			p := "layers.0.linear_attn."
			// The projections' outputs are slices of one activation (fuseProjections).
			wantNames := []string{"gdn_normed", "gdn_partial", "gdn_in", p + "conv1d.weight", "state.0.conv", "gdn_in", "gdn_in", p + "A_log", p + "dt_bias",
				"gdn_in", p + "norm.weight", "state.0.gdn", "state.0.gdn_arrivals"}
			if op.Layer == 0 {
				if diff := cmp.Diff(wantNames, names); diff != "" {
					t.Errorf("%s: layer 0 operands (-want +got):\n%s", target, diff)
				}
			}
		}
		if n := kindCounts(fused["prefill_4"])[ir.GDNDecodeStep] + kindCounts(fused["prefill_4"])[ir.GDNDecodeSplit]; n != 0 {
			t.Errorf("%s: prefill has %d fused GDN steps", target, n)
		}
		if n := kindCounts(fused["prefill_4"])[ir.GatedDeltaChunked]; n != gdnLayers {
			t.Errorf("%s: prefill has %d gated_delta_chunked, want %d", target, n, gdnLayers)
		}
	}
	if n := kindCounts(graphsAfter(t, m, plan.CPU, "fuse", FuseDefault)["decode"])[ir.GDNDecodeStep]; n != 0 {
		t.Errorf("the cpu plan fuses %d GDN chains by default", n)
	}
	if n := kindCounts(graphsAfter(t, m, plan.CPU, "fuse", FuseOn)["decode"])[ir.GDNDecodeStep]; n != gdnLayers {
		t.Errorf("the cpu plan with fusion on has %d gdn_decode_step, want %d", n, gdnLayers)
	}
	if n := kindCounts(graphsAfter(t, m, plan.SM90, "fuse", FuseOff)["decode"])[ir.GDNDecodeSplit]; n != 0 {
		t.Errorf("fusion off still fuses %d GDN chains", n)
	}
	// Head dims of 4 do not split over gdn_decode_step's 256-thread block,
	// but gdn_decode_split runs them in one-column tiles.
	small := FromConfig("tiny", tinyConfig(t))
	if n := kindCounts(graphsAfter(t, small, plan.SM90, "fuse", FuseDefault)["decode"])[ir.GDNDecodeSplit]; n == 0 {
		t.Error("head dims of 4 do not fuse on sm_90")
	}
	if n := kindCounts(graphsAfter(t, small, plan.CPU, "fuse", FuseOn)["decode"])[ir.GDNDecodeStep]; n == 0 {
		t.Error("head dims of 4 do not fuse on the cpu with fusion on")
	}
}

// TestGDNSplitTile picks the widest column tile that gives about every
// multiprocessor a block, the narrowest fitting one where none does, and
// none where no tile fits (the step keeps gdn_decode_step or the chain).
func TestGDNSplitTile(t *testing.T) {
	shape := func(hk, hv, dk, dv int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": 4}}
	}
	for _, tt := range []struct {
		name   string
		p      ir.Params
		target plan.Target
		want   int
	}{
		{"model on sm_90: 128 blocks", shape(16, 32, 128, 128), plan.SM90, 32},
		{"model on gfx1151: 64 blocks", shape(16, 32, 128, 128), plan.GFX1151, 64},
		{"tiny fixtures", shape(2, 4, 16, 16), plan.SM90, 1},
		{"odd v_dim", shape(2, 4, 12, 10), plan.GFX1151, 1},
		{"k_dim over no row parts", shape(2, 4, 300, 4), plan.SM90, 0},
	} {
		if got := gdnSplitTile(tt.p, tt.target.Launch()); got != tt.want {
			t.Errorf("%s: tile %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestFuseGDNDecodeRefuses leaves the chain alone when fusing would change
// what the graph computes.
func TestFuseGDNDecodeRefuses(t *testing.T) {
	m := FromConfig("tiny", gdnFitConfig(t))
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
	if g := lowered(); fuseGDNDecode(g, plan.SM90, 0) == 0 {
		t.Fatal("the lowered chain does not fuse")
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
	}{
		{"k at the wrong offset", func(g *ir.Graph) { g.Ops[first(g, ir.L2NormHeads)+1].Operands[0].Offset += 16 }},
		{"l2 eps differs", func(g *ir.Graph) { g.Ops[first(g, ir.L2NormHeads)+1].Params.SetReal("eps", 1e-5) }},
		{"gates not the recurrence's", func(g *ir.Graph) {
			r := g.Ops[first(g, ir.GatedDeltaRecurrent)]
			r.Operands[4], r.Operands[5] = r.Operands[5], r.Operands[4]
		}},
		{"output rows read again", func(g *ir.Graph) {
			i := first(g, ir.GatedRMSNorm)
			extra := &ir.Op{Kind: ir.Add, Layer: g.Ops[i].Layer, Rows: g.Ops[i].Rows, Params: params(ints{"width": 64}),
				Operands: []ir.Operand{g.Ops[i].Operands[0], g.Ops[i].Operands[1]}}
			g.Ops = append(g.Ops[:i+1], append([]*ir.Op{extra}, g.Ops[i+1:]...)...)
		}},
		{"an op inside the chain", func(g *ir.Graph) {
			i := first(g, ir.GDNGates)
			g.Ops = append(g.Ops[:i+1], append([]*ir.Op{g.Ops[i]}, g.Ops[i+1:]...)...)
		}},
		{"norm in place on the output", func(g *ir.Graph) {
			i := first(g, ir.GatedRMSNorm)
			g.Ops[i].Operands[0] = g.Ops[i].Operands[1]
		}},
	}
	for _, tt := range tests {
		g := lowered()
		before := fuseGDNDecode(lowered(), plan.SM90, 0)
		tt.modify(g)
		// The first layer's chain is modified; the others still fuse.
		if n := fuseGDNDecode(g, plan.SM90, 0); n != before-1 {
			t.Errorf("%s: fused %d chains, want %d", tt.name, n, before-1)
		}
	}
}

// TestGDNColumnTileOption follows Options.GDNColumnTile: -1 keeps
// gdn_decode_step, a tile that fits is taken on any target (the cpu
// included, with fusion on), one that does not keeps gdn_decode_step, and
// a value below -1 is refused.
func TestGDNColumnTileOption(t *testing.T) {
	m := FromConfig("tiny", gdnFitConfig(t))
	decode := func(target plan.Target, f Fusion, tile int) *ir.Graph {
		gs, err := Graphs(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, Fusion: f, GDNColumnTile: tile}, "fuse")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.Name == "decode" {
				return g
			}
		}
		t.Fatal("no decode graph")
		return nil
	}
	for _, tt := range []struct {
		name   string
		target plan.Target
		f      Fusion
		tile   int
		kind   ir.Kind
		want   int // the col_tile of the split, 0 for gdn_decode_step
	}{
		{"sm_90 default", plan.SM90, FuseDefault, 0, ir.GDNDecodeSplit, 1},
		{"sm_90 kept", plan.SM90, FuseDefault, -1, ir.GDNDecodeStep, 0},
		{"sm_90 asked", plan.SM90, FuseDefault, 8, ir.GDNDecodeSplit, 8},
		{"gfx1151 asked 16-byte", plan.GFX1151, FuseDefault, 4, ir.GDNDecodeSplit, 4},
		{"sm_90 not dividing", plan.SM90, FuseDefault, 3, ir.GDNDecodeStep, 0},
		{"cpu asked", plan.CPU, FuseOn, 4, ir.GDNDecodeSplit, 4},
		{"cpu default", plan.CPU, FuseOn, 0, ir.GDNDecodeStep, 0},
	} {
		g := decode(tt.target, tt.f, tt.tile)
		n := 0
		for _, op := range g.Ops {
			if op.Kind == ir.GDNDecodeStep || op.Kind == ir.GDNDecodeSplit {
				n++
				if op.Kind != tt.kind || (tt.want > 0 && op.Params.Int("col_tile") != tt.want) {
					t.Errorf("%s: %s col_tile %d, want %s col_tile %d", tt.name, op.Kind, op.Params.Int("col_tile"), tt.kind, tt.want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no fused GDN step", tt.name)
		}
	}
	if _, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64, GDNColumnTile: -2}); err == nil || !strings.Contains(err.Error(), "gdn column tile -2") {
		t.Errorf("tile -2: error %v", err)
	}
}
