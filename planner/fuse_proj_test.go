package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// TestFuseProjections checks the rule on the lowering of a model whose
// layout aligns: every step reads the concatenated weights only (no
// checkpoint tensor is bound twice); decode runs each group as one matmul
// (then an rmsnorm_gemv) into one activation whose slices its readers take
// at the parts' columns; prefill keeps a matmul per part, reading the
// concatenated weight at the part's rows, its outputs unchanged.
func TestFuseProjections(t *testing.T) {
	m := FromConfig("tiny", gdnFitConfig(t))
	c := m.Config
	QKV, VD, HV := c.LinearQKVDim(), c.LinearValueDim(), c.LinearNumValueHeads
	H := int64(c.HiddenSize)
	for _, target := range []plan.Target{plan.SM90, plan.CPU} {
		gs := graphsAfter(t, m, target, "fuse", FuseOn)
		for name, g := range gs {
			for _, tn := range g.Tensors {
				if strings.Contains(tn.Name, "in_proj_z") || strings.Contains(tn.Name, "q_proj") {
					t.Errorf("%s %s: %s survives the concatenation", target, name, tn.Name)
				}
			}
		}
		dec := gs["decode"]
		for _, op := range dec.Ops {
			if op.Kind != ir.GDNDecodeStep || op.Layer != 0 {
				continue
			}
			// mixed, b, a and z of gdn_decode_step: slices of gdn_in.
			got := map[string]int64{}
			for i, name := range []string{"mixed", "b", "a", "z"} {
				o := op.Operands[kernels.Families[ir.GDNDecodeStep].Operand(name)]
				if dec.Tensors[o.Tensor].Name != "gdn_in" {
					t.Errorf("%s: operand %d reads %s, want gdn_in", target, i, dec.Tensors[o.Tensor].Name)
				}
				got[name] = o.Offset
			}
			want := map[string]int64{"mixed": 0, "z": int64(QKV), "b": int64(QKV + VD), "a": int64(QKV + VD + HV)}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: gdn_in offsets (-want +got):\n%s", target, d)
			}
		}
		first := dec.Ops[1] // after the embedding: layer 0's input norm folded into its projection
		w := dec.Tensors[first.Operands[3].Tensor]
		wantParts := []ir.Part{
			{Source: "layers.0.linear_attn.in_proj_qkv.weight", Rows: [2]int64{0, int64(QKV)}},
			{Source: "layers.0.linear_attn.in_proj_z.weight", Rows: [2]int64{int64(QKV), int64(QKV + VD)}},
			{Source: "layers.0.linear_attn.in_proj_b.weight", Rows: [2]int64{int64(QKV + VD), int64(QKV + VD + HV)}},
			{Source: "layers.0.linear_attn.in_proj_a.weight", Rows: [2]int64{int64(QKV + VD + HV), int64(QKV + VD + 2*HV)}},
		}
		if first.Kind != ir.RMSNormGEMV || w.Name != "layers.0.linear_attn.in_proj_qkvzba.weight" || w.Source != "" {
			t.Fatalf("%s: decode's first layer op %s over %s", target, first.Kind, w.Name)
		}
		if d := cmp.Diff(wantParts, w.Parts); d != "" {
			t.Errorf("%s: parts (-want +got):\n%s", target, d)
		}
		// Prefill: a matmul per part at its rows of the concatenated weight.
		pre := gs["prefill_4"]
		var offs []string
		for _, op := range pre.Ops {
			if op.Kind == ir.MatMul && op.Layer == 0 && strings.HasPrefix(pre.Tensors[op.Operands[0].Tensor].Name, "gdn_") {
				o := op.Operands[2]
				offs = append(offs, fmt.Sprintf("%s<-%s@%d", pre.Tensors[op.Operands[0].Tensor].Name, pre.Tensors[o.Tensor].Name, o.Offset))
			}
		}
		cat := "layers.0.linear_attn.in_proj_qkvzba.weight"
		wantOffs := []string{"gdn_mixed<-" + cat + "@0", fmt.Sprintf("gdn_z<-%s@%d", cat, int64(QKV)*H),
			fmt.Sprintf("gdn_b<-%s@%d", cat, int64(QKV+VD)*H), fmt.Sprintf("gdn_a<-%s@%d", cat, int64(QKV+VD+HV)*H)}
		if d := cmp.Diff(wantOffs, offs); d != "" {
			t.Errorf("%s: prefill's projections (-want +got):\n%s", target, d)
		}
	}
	// The whole plan validates, which holds every checkpoint tensor once.
	if _, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64}); err != nil {
		t.Fatal(err)
	}
}

// TestFuseProjectionsRefuses leaves the matmuls alone when they are not
// the group's run over one input, or a part would start off the kernels'
// argument alignment.
func TestFuseProjectionsRefuses(t *testing.T) {
	// build is the attention group of layer 0 over x: q (n 8), k (4), v (4), K = 8.
	build := func() *ir.Graph {
		g := &ir.Graph{Name: "t", Tokens: 1, Dyn: []ir.Slot{ir.ParamN}}
		x := g.AddTensor(ir.Tensor{Name: "x", DType: ir.F32, Shape: []int64{1, 8}, Role: ir.State})
		x2 := g.AddTensor(ir.Tensor{Name: "x2", DType: ir.F32, Shape: []int64{1, 8}, Role: ir.State})
		n := ir.SlotRef(ir.ParamN)
		for _, p := range []struct {
			name string
			n    int64
		}{{"q", 8}, {"k", 4}, {"v", 4}} {
			w := g.AddTensor(ir.Tensor{Name: p.name, DType: ir.BF16, Shape: []int64{p.n, 8}, Role: ir.Weight, Source: "layers.0.self_attn." + p.name + "_proj.weight"})
			y := g.AddTensor(ir.Tensor{Name: "y" + p.name, DType: ir.F32, Shape: []int64{1, p.n}, Role: ir.Activation})
			g.Ops = append(g.Ops, &ir.Op{Kind: ir.MatMul, Rows: n, Params: params(ints{"k": 8, "n": p.n}),
				Operands: []ir.Operand{{Tensor: y.ID}, {Tensor: x.ID}, {Tensor: w.ID}}})
		}
		// Readers of the outputs, so the graph verifies.
		for _, y := range []string{"yq", "yk", "yv"} {
			t := g.Tensor(y)
			g.Ops = append(g.Ops, &ir.Op{Kind: ir.Add, Rows: n, Params: params(ints{"width": t.Shape[1]}),
				Operands: []ir.Operand{{Tensor: x2.ID}, {Tensor: t.ID}}})
		}
		return g
	}
	g := build()
	if fuseProjections(g) != 1 {
		t.Fatal("the plain group does not fuse")
	}
	g.DropUnused()
	if err := g.Verify(kernels.Families); err != nil {
		t.Fatalf("the fused group: %v", err)
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
	}{
		{"parts out of order", func(g *ir.Graph) { g.Ops[1], g.Ops[2] = g.Ops[2], g.Ops[1] }},
		{"another input", func(g *ir.Graph) { g.Ops[1].Operands[1].Tensor = 1 }},
		{"another layer", func(g *ir.Graph) { g.Ops[2].Layer = 1 }},
		{"a part missing", func(g *ir.Graph) { g.Ops[2].Kind = ir.GEMV }},
		{"misaligned part", func(g *ir.Graph) {
			// k of 3 rows puts v at column 11: 44 bytes.
			g.Tensors[g.Ops[1].Operands[2].Tensor].Shape[0] = 3
			g.Ops[1].Params.SetInt("n", 3)
		}},
		{"output not an activation", func(g *ir.Graph) { g.Tensors[g.Ops[0].Operands[0].Tensor].Role = ir.Output }},
	}
	for _, tt := range tests {
		g := build()
		tt.modify(g)
		before := g.Dump(kernels.Families)
		if n := fuseProjections(g); n != 0 || g.Dump(kernels.Families) != before {
			t.Errorf("%s: fused %d", tt.name, n)
		}
	}
}
