package ir_test

import (
	"strings"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// graph builds a small valid graph: x = embed(ids); y = x · Wᵀ.
func graph() *ir.Graph {
	g := &ir.Graph{Name: "t", Tokens: 4, Dyn: []ir.Slot{ir.ParamN}}
	ids := g.AddTensor(ir.Tensor{Name: "ids", DType: ir.I32, Shape: []int64{4}, Role: ir.Input})
	table := g.AddTensor(ir.Tensor{Name: "table", DType: ir.BF16, Shape: []int64{10, 8}, Role: ir.Weight, Source: "embed"})
	x := g.AddTensor(ir.Tensor{Name: "x", DType: ir.F32, Shape: []int64{4, 8}, Role: ir.Activation})
	w := g.AddTensor(ir.Tensor{Name: "w", DType: ir.BF16, Shape: []int64{6, 8}, Role: ir.Weight, Source: "w"})
	y := g.AddTensor(ir.Tensor{Name: "y", DType: ir.F32, Shape: []int64{4, 6}, Role: ir.Output})
	g.Ops = []*ir.Op{
		{Kind: ir.Embedding, Layer: -1, Rows: ir.SlotRef(ir.ParamN), Params: ir.Params{Ints: map[string]int64{"hidden": 8, "vocab": 10}},
			Operands: []ir.Operand{{Tensor: x.ID}, {Tensor: table.ID}, {Tensor: ids.ID}}},
		{Kind: ir.MatMul, Layer: 0, Rows: ir.SlotRef(ir.ParamN), Params: ir.Params{Ints: map[string]int64{"k": 8, "n": 6}},
			Operands: []ir.Operand{{Tensor: y.ID}, {Tensor: x.ID}, {Tensor: w.ID}}},
	}
	return g
}

// parts are a concatenated weight's parts: name, first row, end row, ….
func parts(spec ...any) []ir.Part {
	var out []ir.Part
	for i := 0; i+2 < len(spec); i += 3 {
		out = append(out, ir.Part{Source: spec[i].(string), Rows: [2]int64{int64(spec[i+1].(int)), int64(spec[i+2].(int))}})
	}
	return out
}

func TestVerify(t *testing.T) {
	// A concatenated weight in place of w is as valid.
	{
		g := graph()
		g.Tensors[3].Source, g.Tensors[3].Parts = "", parts("w.a", 0, 4, "w.b", 4, 6)
		if err := g.Verify(kernels.Families); err != nil {
			t.Fatalf("concatenated weight: %v", err)
		}
	}
	if err := graph().Verify(kernels.Families); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	tests := []struct {
		name   string
		modify func(g *ir.Graph)
		want   string
	}{
		{"unknown kind", func(g *ir.Graph) { g.Ops[1].Kind = "conv3d" }, `unknown kernel family "conv3d"`},
		{"operand count", func(g *ir.Graph) { g.Ops[1].Operands = g.Ops[1].Operands[:2] }, "2 operands, want 3"},
		{"missing parameter", func(g *ir.Graph) { delete(g.Ops[1].Params.Ints, "k") }, "parameter k (integer) missing"},
		{"undeclared parameter", func(g *ir.Graph) { g.Ops[1].Params.SetInt("m", 3) }, "parameter m is not a parameter of family matmul"},
		{"parameter of the wrong kind", func(g *ir.Graph) {
			delete(g.Ops[1].Params.Ints, "k")
			g.Ops[1].Params.SetReal("k", 8)
		}, "parameter k is given as a real, family matmul declares it an integer"},
		{"extent below one", func(g *ir.Graph) { g.Ops[1].Params.Ints["n"] = 0 }, "want an integer from 1"},
		{"dtype", func(g *ir.Graph) { g.Tensors[3].DType = ir.F32 }, "is f32, want bf16"},
		{"out of bounds", func(g *ir.Graph) { g.Ops[1].Params.Ints["n"] = 7 }, "reaches element"},
		{"offset out of bounds", func(g *ir.Graph) { g.Ops[1].Operands[1].Offset = 1 }, "reaches element"},
		{"write to a weight", func(g *ir.Graph) { g.Ops[1].Operands[0].Tensor = 3 }, "writes weight tensor w"},
		{"read before write", func(g *ir.Graph) { g.Ops[0], g.Ops[1] = g.Ops[1], g.Ops[0] }, "reads activation x before any op writes it"},
		{"rows from an unset slot", func(g *ir.Graph) { g.Ops[1].Rows = ir.SlotRef(ir.ParamRow0) }, "dynamic value row0, which the graph does not set"},
		{"no rows", func(g *ir.Graph) { g.Ops[1].Rows = nil }, "no row slot and no constant rows parameter"},
		{"slot not set", func(g *ir.Graph) {
			g.Ops[1].Kind = ir.RoPE
		}, "operands, want 1"},
		{"unused tensor", func(g *ir.Graph) {
			g.AddTensor(ir.Tensor{Name: "spare", DType: ir.F32, Shape: []int64{1}, Role: ir.Activation})
		}, "tensor spare: never used"},
		{"duplicate name", func(g *ir.Graph) { g.Tensors[4].Name = "x" }, "tensor x: duplicate name"},
		{"weight without source", func(g *ir.Graph) { g.Tensors[1].Source = "" }, "weight without a checkpoint source"},
		{"source and parts", func(g *ir.Graph) { g.Tensors[3].Parts = parts("a", 0, 6) }, "parts belong to a weight without a source"},
		{"parts of an activation", func(g *ir.Graph) { g.Tensors[2].Parts = parts("a", 0, 4) }, "parts belong to a weight"},
		{"parts short", func(g *ir.Graph) { g.Tensors[3].Source, g.Tensors[3].Parts = "", parts("a", 0, 2, "b", 2, 5) }, "parts cover 5 rows of 6"},
		{"parts with a gap", func(g *ir.Graph) { g.Tensors[3].Source, g.Tensors[3].Parts = "", parts("a", 0, 2, "b", 3, 6) }, "want rows from 2 on"},
		{"part empty", func(g *ir.Graph) { g.Tensors[3].Source, g.Tensors[3].Parts = "", parts("a", 0, 0, "b", 0, 6) }, "at least one"},
		{"part twice", func(g *ir.Graph) { g.Tensors[3].Source, g.Tensors[3].Parts = "", parts("a", 0, 2, "a", 2, 6) }, `part "a": empty or named twice`},
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
	g := &ir.Graph{Name: "t", Tokens: 2, Dyn: []ir.Slot{ir.ParamN}}
	x := g.AddTensor(ir.Tensor{Name: "x", DType: ir.F32, Shape: []int64{2, 8}, Role: ir.State})
	g.Ops = []*ir.Op{{Kind: ir.RoPE, Rows: ir.SlotRef(ir.ParamN), Operands: []ir.Operand{{Tensor: x.ID}},
		Params: ir.Params{Ints: map[string]int64{"row_stride": 8, "heads": 1, "head_dim": 8, "rot_dim": 4}, Reals: map[string]float64{"theta": 1e4}}}}
	if err := g.Verify(kernels.Families); err == nil || !strings.Contains(err.Error(), "reads dynamic value pos, which the graph does not set") {
		t.Errorf("error %v", err)
	}
	g.Dyn = append(g.Dyn, ir.ParamPos)
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
	fixed := map[string]ir.Slot{"pos": 0, "seed_lo": 1, "top_k": 7, "fill_seed_lo": 8, "fill_scale": 13, "vocab_limit": 14, "n": 15, "last": 16, "row0": 17}
	for name, want := range fixed {
		s, err := ir.SlotNamed(name)
		if err != nil || s != want {
			t.Errorf("ir.SlotNamed(%s) = %d, %v; want %d", name, s, err, want)
		}
		b, err := s.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("%d marshals to %q, %v", s, b, err)
		}
	}
	if _, err := ir.SlotNamed("nope"); err == nil {
		t.Error("unknown slot name accepted")
	}
	if _, err := ir.Slot(30).MarshalText(); err == nil {
		t.Error("unnamed slot marshals")
	}
}

// TestOptionalFlag: an optional flag may be left out (it reads false) or
// given; a flag given as another kind is still refused.
func TestOptionalFlag(t *testing.T) {
	f := &ir.Family{Kind: "t", Params: append(ir.Ints("k"), ir.OptionalFlags("f")...)}
	tests := []struct {
		name string
		p    ir.Params
		want string
	}{
		{"left out", ir.Params{Ints: map[string]int64{"k": 1}}, ""},
		{"given", ir.Params{Ints: map[string]int64{"k": 1}, Flags: map[string]bool{"f": true}}, ""},
		{"as an integer", ir.Params{Ints: map[string]int64{"k": 1, "f": 1}}, "parameter f is given as an integer, family t declares it a flag"},
		{"required one missing", ir.Params{Flags: map[string]bool{"f": true}}, "parameter k (integer) missing"},
	}
	for _, tt := range tests {
		err := f.CheckParams(tt.p)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	if (ir.Params{Ints: map[string]int64{"k": 1}}).Flag("f") {
		t.Error("a left-out flag reads true")
	}
}
