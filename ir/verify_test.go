package ir_test

import (
	"strings"
	"testing"

	. "github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// graph builds a small valid graph: x = embed(ids); y = x · Wᵀ.
func graph() *Graph {
	g := &Graph{Name: "t", Tokens: 4, Dyn: []Slot{ParamN}}
	ids := g.AddTensor(Tensor{Name: "ids", DType: I32, Shape: []int64{4}, Role: Input})
	table := g.AddTensor(Tensor{Name: "table", DType: BF16, Shape: []int64{10, 8}, Role: Weight, Source: "embed"})
	x := g.AddTensor(Tensor{Name: "x", DType: F32, Shape: []int64{4, 8}, Role: Activation})
	w := g.AddTensor(Tensor{Name: "w", DType: BF16, Shape: []int64{6, 8}, Role: Weight, Source: "w"})
	y := g.AddTensor(Tensor{Name: "y", DType: F32, Shape: []int64{4, 6}, Role: Output})
	g.Ops = []*Op{
		{Kind: Embedding, Layer: -1, Rows: SlotRef(ParamN), Params: Params{Ints: map[string]int64{"hidden": 8, "vocab": 10}},
			Operands: []Operand{{Tensor: x.ID}, {Tensor: table.ID}, {Tensor: ids.ID}}},
		{Kind: MatMul, Layer: 0, Rows: SlotRef(ParamN), Params: Params{Ints: map[string]int64{"k": 8, "n": 6}},
			Operands: []Operand{{Tensor: y.ID}, {Tensor: x.ID}, {Tensor: w.ID}}},
	}
	return g
}

func TestVerify(t *testing.T) {
	if err := graph().Verify(kernels.Families); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	tests := []struct {
		name   string
		modify func(g *Graph)
		want   string
	}{
		{"unknown kind", func(g *Graph) { g.Ops[1].Kind = "conv3d" }, `unknown kernel family "conv3d"`},
		{"operand count", func(g *Graph) { g.Ops[1].Operands = g.Ops[1].Operands[:2] }, "2 operands, want 3"},
		{"missing parameter", func(g *Graph) { delete(g.Ops[1].Params.Ints, "k") }, "parameter k (integer) missing"},
		{"undeclared parameter", func(g *Graph) { g.Ops[1].Params.SetInt("m", 3) }, "parameter m is not a parameter of family matmul"},
		{"parameter of the wrong kind", func(g *Graph) {
			delete(g.Ops[1].Params.Ints, "k")
			g.Ops[1].Params.SetReal("k", 8)
		}, "parameter k is given as a real, family matmul declares it an integer"},
		{"extent below one", func(g *Graph) { g.Ops[1].Params.Ints["n"] = 0 }, "want an integer from 1"},
		{"dtype", func(g *Graph) { g.Tensors[3].DType = F32 }, "is f32, want bf16"},
		{"out of bounds", func(g *Graph) { g.Ops[1].Params.Ints["n"] = 7 }, "reaches element"},
		{"offset out of bounds", func(g *Graph) { g.Ops[1].Operands[1].Offset = 1 }, "reaches element"},
		{"write to a weight", func(g *Graph) { g.Ops[1].Operands[0].Tensor = 3 }, "writes weight tensor w"},
		{"read before write", func(g *Graph) { g.Ops[0], g.Ops[1] = g.Ops[1], g.Ops[0] }, "reads activation x before any op writes it"},
		{"rows from an unset slot", func(g *Graph) { g.Ops[1].Rows = SlotRef(ParamRow0) }, "dynamic value row0, which the graph does not set"},
		{"no rows", func(g *Graph) { g.Ops[1].Rows = nil }, "no row slot and no constant rows parameter"},
		{"slot not set", func(g *Graph) {
			g.Ops[1].Kind = RoPE
		}, "operands, want 1"},
		{"unused tensor", func(g *Graph) {
			g.AddTensor(Tensor{Name: "spare", DType: F32, Shape: []int64{1}, Role: Activation})
		}, "tensor spare: never used"},
		{"duplicate name", func(g *Graph) { g.Tensors[4].Name = "x" }, "tensor x: duplicate name"},
		{"weight without source", func(g *Graph) { g.Tensors[1].Source = "" }, "weight without a checkpoint source"},
	}
	for _, tt := range tests {
		g := graph()
		tt.modify(g)
		err := g.Verify(kernels.Families)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestVerifySlots requires a family's slots to be set by the graph.
func TestVerifySlots(t *testing.T) {
	g := &Graph{Name: "t", Tokens: 2, Dyn: []Slot{ParamN}}
	x := g.AddTensor(Tensor{Name: "x", DType: F32, Shape: []int64{2, 8}, Role: State})
	g.Ops = []*Op{{Kind: RoPE, Rows: SlotRef(ParamN), Operands: []Operand{{Tensor: x.ID}},
		Params: Params{Ints: map[string]int64{"row_stride": 8, "heads": 1, "head_dim": 8, "rot_dim": 4}, Reals: map[string]float64{"theta": 1e4}}}}
	if err := g.Verify(kernels.Families); err == nil || !strings.Contains(err.Error(), "reads dynamic value pos, which the graph does not set") {
		t.Errorf("error %v", err)
	}
	g.Dyn = append(g.Dyn, ParamPos)
	if err := g.Verify(kernels.Families); err != nil {
		t.Error(err)
	}
}

func TestDump(t *testing.T) {
	d := graph().Dump(kernels.Families)
	for _, want := range []string{"graph t tokens=4 dyn=n", "%1 table bf16 [10 8] weight <- embed", "matmul(y=%4, x=%2, w=%3) k=8 n=6 rows=n"} {
		if !strings.Contains(d, want) {
			t.Errorf("dump lacks %q:\n%s", want, d)
		}
	}
}

// TestSlotNames round-trips every named slot through its text form and
// keeps the slot numbers rendered kernels were compiled with.
func TestSlotNames(t *testing.T) {
	fixed := map[string]Slot{"pos": 0, "seed_lo": 1, "top_k": 7, "fill_seed_lo": 8, "fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17}
	for name, want := range fixed {
		s, err := SlotNamed(name)
		if err != nil || s != want {
			t.Errorf("SlotNamed(%s) = %d, %v; want %d", name, s, err, want)
		}
		b, err := s.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("%d marshals to %q, %v", s, b, err)
		}
	}
	if _, err := SlotNamed("nope"); err == nil {
		t.Error("unknown slot name accepted")
	}
	if _, err := Slot(30).MarshalText(); err == nil {
		t.Error("unnamed slot marshals")
	}
}
