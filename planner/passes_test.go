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

func TestPassOrder(t *testing.T) {
	if diff := cmp.Diff([]string{"lower", "fuse", "split_kv", "flash", "gdn", "stream", "tile", "certify", "configure", "schedule"}, Passes()); diff != "" {
		t.Errorf("passes (-want +got):\n%s", diff)
	}
}

// TestInvariantsAfterEveryPass runs the passes for every target with and
// without fusion and checks, after each: every graph verifies; after
// configure every GPU op has a launch within the target's configuration;
// after schedule the plan validates (the live-range non-overlap included)
// and every activation has its placement.
func TestInvariantsAfterEveryPass(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, target := range plan.Targets {
		for _, fusion := range []Fusion{FuseDefault, FuseOn, FuseOff} {
			ran := []string{}
			check := func(pass string, c *compilation) error {
				ran = append(ran, pass)
				for _, g := range c.graphs {
					if err := g.Verify(kernels.Families); err != nil {
						return fmt.Errorf("%s: %w", g.Name, err)
					}
					for i, op := range g.Ops {
						configured := pass == "configure" || pass == "schedule"
						if configured && target.GPU() != (op.Launch != nil) {
							return fmt.Errorf("%s op %d (%s): launch %v on %s", g.Name, i, op.Kind, op.Launch, target)
						}
						if l := op.Launch; l != nil && (l.Block[0]*l.Block[1]*l.Block[2] > target.Launch().Threads || l.SharedBytes > target.Launch().MaxSharedBytes) {
							return fmt.Errorf("%s op %d: launch %+v", g.Name, i, *l)
						}
					}
					for _, tn := range g.Tensors {
						if pass == "schedule" && !tn.Role.Persistent() && tn.Placement == nil {
							return fmt.Errorf("%s: activation %s not placed", g.Name, tn.Name)
						}
					}
				}
				if pass == "schedule" {
					return c.plan.Validate()
				}
				return nil
			}
			o := Options{Target: target, Buckets: []int{4, 16}, ContextTokens: 64, Fusion: fusion}
			if _, err := compile(m, o, "", check); err != nil {
				t.Fatalf("%s, fusion %q: %v", target, fusion, err)
			}
			if diff := cmp.Diff(Passes(), ran); diff != "" {
				t.Errorf("%s: checked passes (-want +got):\n%s", target, diff)
			}
		}
	}
}

// TestFuseMatMulAdd checks the rule on the decode step: every mixer's
// output projection and its residual add become one matmul_add into x, the
// projection's output tensor goes, nothing else changes, and only on the
// targets that fuse.
func TestFuseMatMulAdd(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	count := func(g *ir.Graph) map[ir.Kind]int {
		n := map[ir.Kind]int{}
		for _, op := range g.Ops {
			n[op.Kind]++
		}
		return n
	}
	decode := func(target plan.Target, after string, f Fusion) *ir.Graph {
		gs, err := Graphs(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, Fusion: f}, after)
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
	layers := m.Config.NumHiddenLayers
	lowered, fused := count(decode(plan.SM90, "lower", FuseDefault)), count(decode(plan.SM90, "fuse", FuseDefault))
	want := lowered
	want[ir.MatMul] -= layers
	want[ir.Add] -= layers
	want[ir.MatMulAdd] = layers
	delete(want, ir.Add)
	qkFused(want)
	// and the GDN rule (fuse_gdn_test.go) on its layers
	gdn := lowered[ir.GDNGates]
	for _, k := range gdnChain {
		if want[k] -= gdn; want[k] == 0 {
			delete(want, k)
		}
	}
	want[ir.GDNDecodeSplit] = gdn
	moeFused(want, layers)
	// The GDN projections do not concatenate here: a's columns would start
	// at 26 floats, off the 16-byte argument alignment.
	foldedByOtherRules(want, m.Config, false)
	if diff := cmp.Diff(want, fused); diff != "" {
		t.Errorf("fused decode op counts (-want +got):\n%s", diff)
	}
	g := decode(plan.SM90, "fuse", FuseDefault)
	if g.Tensor("mixer_out") != nil {
		t.Error("mixer_out survives the fusion")
	}
	for _, op := range g.Ops {
		if op.Kind == ir.MatMulAdd && g.Tensors[op.Operands[0].Tensor].Name != "x" {
			t.Errorf("matmul_add into %s, want the residual x", g.Tensors[op.Operands[0].Tensor].Name)
		}
	}
	if n := count(decode(plan.CPU, "fuse", FuseDefault))[ir.MatMulAdd]; n != 0 {
		t.Errorf("the cpu plan fuses %d ops by default", n)
	}
	if n := count(decode(plan.CPU, "fuse", FuseOn))[ir.MatMulAdd]; n != layers {
		t.Errorf("the cpu plan with fusion on has %d matmul_add, want %d", n, layers)
	}
	if n := count(decode(plan.SM90, "fuse", FuseOff))[ir.MatMulAdd]; n != 0 {
		t.Errorf("fusion off still fuses %d ops", n)
	}
}

// TestFuseMatMulAddRefuses leaves the pattern alone when fusing would
// change what the graph computes.
func TestFuseMatMulAddRefuses(t *testing.T) {
	build := func() *ir.Graph {
		g := &ir.Graph{Name: "t", Tokens: 2, Dyn: []ir.Slot{ir.ParamN}}
		a := g.AddTensor(ir.Tensor{Name: "a", DType: ir.F32, Shape: []int64{2, 8}, Role: ir.State})
		w := g.AddTensor(ir.Tensor{Name: "w", DType: ir.BF16, Shape: []int64{8, 8}, Role: ir.Weight, Source: "w"})
		x := g.AddTensor(ir.Tensor{Name: "x", DType: ir.F32, Shape: []int64{2, 8}, Role: ir.State})
		mo := g.AddTensor(ir.Tensor{Name: "m", DType: ir.F32, Shape: []int64{2, 8}, Role: ir.Activation})
		n := ir.SlotRef(ir.ParamN)
		g.Ops = []*ir.Op{
			{Kind: ir.MatMul, Rows: n, Params: params(ints{"k": 8, "n": 8}), Operands: []ir.Operand{{Tensor: mo.ID}, {Tensor: a.ID}, {Tensor: w.ID}}},
			{Kind: ir.Add, Rows: n, Params: params(ints{"width": 8}), Operands: []ir.Operand{{Tensor: x.ID}, {Tensor: mo.ID}}},
		}
		return g
	}
	if g := build(); fuseMatMulAdd(g) != 1 {
		t.Fatal("the plain pattern does not fuse")
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
	}{
		{"x used in between", func(g *ir.Graph) {
			g.Ops = []*ir.Op{g.Ops[0], {Kind: ir.Add, Rows: g.Ops[0].Rows, Params: params(ints{"width": 8}),
				Operands: []ir.Operand{{Tensor: 0}, {Tensor: 2}}}, g.Ops[1]}
		}},
		{"matmul reads x", func(g *ir.Graph) { g.Ops[0].Operands[1].Tensor = 2 }},
		{"output used again", func(g *ir.Graph) {
			g.Ops = append(g.Ops, &ir.Op{Kind: ir.Add, Rows: g.Ops[0].Rows, Params: params(ints{"width": 8}),
				Operands: []ir.Operand{{Tensor: 0}, {Tensor: 3}}})
		}},
		{"output not an activation", func(g *ir.Graph) { g.Tensors[3].Role = ir.Output }},
		{"constant rows", func(g *ir.Graph) { g.Ops[0].Rows = nil; g.Ops[0].Params.SetInt(ir.RowsParam, 1) }},
		{"output at an offset", func(g *ir.Graph) { g.Ops[1].Operands[1].Offset = 8 }},
	}
	for _, tt := range tests {
		g := build()
		tt.modify(g)
		before := g.Dump(kernels.Families)
		if n := fuseMatMulAdd(g); n != 0 || g.Dump(kernels.Families) != before {
			t.Errorf("%s: fused %d", tt.name, n)
		}
	}
}

func TestCompileUnknownPass(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	_, err := Graphs(m, Options{Target: plan.CPU, Buckets: []int{4}, ContextTokens: 8}, "inline")
	if err == nil || !strings.Contains(err.Error(), `no planner pass "inline"`) {
		t.Errorf("error %v", err)
	}
}
