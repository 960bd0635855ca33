package planner

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// foldedByOtherRules applies to a decode step's op counts what
// fuseProjections and fuseNormGEMV do to it: per GDN layer three matmuls
// fewer (qkv, z, b, a in one) when gdn says the layout aligns, per
// attention layer two (q, k, v in one); then each layer's two norms and the
// final norm fold into the matmul after them (the input projection, the
// router, the LM head).
func foldedByOtherRules(want map[ir.Kind]int, c *arch.Config, gdn bool) {
	for i := range c.NumHiddenLayers {
		if c.IsFullAttention(i) {
			want[ir.MatMul] -= 2
		} else if gdn {
			want[ir.MatMul] -= 3
		}
	}
	norms := 2*c.NumHiddenLayers + 1
	want[ir.RMSNorm] -= norms
	want[ir.MatMul] -= norms
	want[ir.RMSNormGEMV] += norms
	for k, n := range want {
		if n == 0 {
			delete(want, k)
		}
	}
}

// normGraph is a one-row step: xn = rmsnorm(x); y = xn · Wᵀ; z = xn · W2ᵀ
// (another reader of the normed row), over width k.
func normGraph(k int64) *ir.Graph {
	g := &ir.Graph{Name: "t", Tokens: 1, Dyn: []ir.Slot{ir.ParamN}}
	x := g.AddTensor(ir.Tensor{Name: "x", DType: ir.F32, Shape: []int64{1, k}, Role: ir.State})
	nw := g.AddTensor(ir.Tensor{Name: "nw", DType: ir.F32, Shape: []int64{k}, Role: ir.Weight, Source: "norm.weight"})
	xn := g.AddTensor(ir.Tensor{Name: "xn", DType: ir.F32, Shape: []int64{1, k}, Role: ir.Activation})
	w := g.AddTensor(ir.Tensor{Name: "w", DType: ir.BF16, Shape: []int64{6, k}, Role: ir.Weight, Source: "w"})
	w2 := g.AddTensor(ir.Tensor{Name: "w2", DType: ir.BF16, Shape: []int64{6, k}, Role: ir.Weight, Source: "w2"})
	y := g.AddTensor(ir.Tensor{Name: "y", DType: ir.F32, Shape: []int64{1, 6}, Role: ir.Output})
	z := g.AddTensor(ir.Tensor{Name: "z", DType: ir.F32, Shape: []int64{1, 6}, Role: ir.Output})
	n := ir.SlotRef(ir.ParamN)
	g.Ops = []*ir.Op{
		{Kind: ir.RMSNorm, Rows: n, Params: params(ints{"width": k, "heads": 1, "x_stride": k, "y_stride": k}, "eps", 1e-6, "one_plus", true),
			Operands: []ir.Operand{{Tensor: xn.ID}, {Tensor: x.ID}, {Tensor: nw.ID}}},
		{Kind: ir.MatMul, Rows: n, Params: params(ints{"k": k, "n": 6}), Operands: []ir.Operand{{Tensor: y.ID}, {Tensor: xn.ID}, {Tensor: w.ID}}},
		{Kind: ir.MatMul, Rows: n, Params: params(ints{"k": k, "n": 6}), Operands: []ir.Operand{{Tensor: z.ID}, {Tensor: xn.ID}, {Tensor: w2.ID}}},
	}
	return g
}

// TestFuseNormGEMV folds the norm into the first matmul that reads it, the
// normed row still written for the second; the fused op's operands and
// parameters are the pair's, its launch parameters the target's gemv ones.
func TestFuseNormGEMV(t *testing.T) {
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151, plan.CPU} {
		g := normGraph(16)
		if n := fuseNormGEMV(g, target, streamTable[target]); n != 1 {
			t.Fatalf("%s: %d folds", target, n)
		}
		if err := g.Verify(kernels.Families); err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		var kinds, names []string
		for _, op := range g.Ops {
			kinds = append(kinds, string(op.Kind))
		}
		for _, o := range g.Ops[0].Operands {
			names = append(names, g.Tensors[o.Tensor].Name)
		}
		if d := cmp.Diff([]string{"rmsnorm_gemv", "matmul"}, kinds); d != "" {
			t.Errorf("%s: ops (-want +got):\n%s", target, d)
		}
		if d := cmp.Diff([]string{"y", "x", "nw", "w", "xn"}, names); d != "" {
			t.Errorf("%s: operands (-want +got):\n%s", target, d)
		}
		// The early stream where the target's row asks for it and launches overlap.
		early := streamTable[target].Early && target.Programmatic()
		// K 16 is 16-byte aligned and the 192-byte matrix a weight: prefetched where the row asks for it.
		pre := streamTable[target].L2Prefetch && target.Programmatic() && !early
		want := params(ints{"k": 16, "n": 6}, "eps", 1e-6, "one_plus", true, "early", early, "staged", false, "l2_prefetch", pre)
		maps.Copy(want.Ints, gemvParams(6, 16, target, streamTable[target]))
		if d := cmp.Diff(want, g.Ops[0].Params); d != "" {
			t.Errorf("%s: params (-want +got):\n%s", target, d)
		}
	}
}

// TestFuseNormGEMVRefuses keeps the norm where folding it would change
// what the step computes or the kernel cannot hold the row.
func TestFuseNormGEMVRefuses(t *testing.T) {
	tests := []struct {
		name   string
		k      int64
		target plan.Target
		modify func(g *ir.Graph)
	}{
		{"several rows", 16, plan.SM90, func(g *ir.Graph) {
			g.Tokens = 2
			for _, name := range []string{"x", "xn", "y", "z"} {
				g.Tensor(name).Shape[0] = 2
			}
		}},
		{"per-head norm", 16, plan.SM90, func(g *ir.Graph) {
			p := g.Ops[0].Params
			p.SetInt("width", 8)
			p.SetInt("heads", 2)
			p.SetInt("x_stride", 8)
			p.SetInt("y_stride", 8)
		}},
		{"matmul reads at an offset", 16, plan.SM90, func(g *ir.Graph) {
			g.Ops[1].Operands[1].Offset = 4
			g.Ops[1].Params.SetInt("k", 12)
			g.Tensors[g.Ops[1].Operands[2].Tensor].Shape[1] = 12
		}},
		{"input written in between", 16, plan.SM90, func(g *ir.Graph) {
			x := g.Ops[0].Operands[1]
			g.Ops = append([]*ir.Op{g.Ops[0], {Kind: ir.Add, Rows: g.Ops[0].Rows, Params: params(ints{"width": 6}),
				Operands: []ir.Operand{x, {Tensor: g.Tensor("z").ID}}}}, g.Ops[1:]...)
			// z is then written after being read: make the add read y of an earlier step.
			g.Tensors[g.Tensor("z").ID].Role = ir.State
		}},
		{"matmul writes the norm's input", 16, plan.SM90, func(g *ir.Graph) {
			g.Ops[1].Operands[0] = ir.Operand{Tensor: g.Tensor("x").ID}
			g.Ops[1].Params.SetInt("n", 16)
			g.Tensors[g.Tensor("w").ID].Shape[0] = 16
		}},
		{"in place", 16, plan.SM90, func(g *ir.Graph) {
			g.Ops[0].Operands[0] = g.Ops[0].Operands[1]
			g.Ops[1].Operands[1] = g.Ops[0].Operands[1]
			g.Ops[2].Operands[1] = g.Ops[0].Operands[1]
		}},
	}
	for _, tt := range tests {
		g := normGraph(tt.k)
		tt.modify(g)
		g.DropUnused()
		if err := g.Verify(kernels.Families); err != nil {
			t.Fatalf("%s: the graph itself: %v", tt.name, err)
		}
		before := g.Dump(kernels.Families)
		if n := fuseNormGEMV(g, tt.target, streamTable[tt.target]); n != 0 || g.Dump(kernels.Families) != before {
			t.Errorf("%s: folded %d", tt.name, n)
		}
	}
	// Any width folds: the kernel keeps nothing of the row on chip.
	if n := fuseNormGEMV(normGraph(16384), plan.SM90, streamTable[plan.SM90]); n != 1 {
		t.Errorf("sm_90: %d folds of a wide row", n)
	}
}
