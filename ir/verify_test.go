package ir

import (
	"strings"
	"testing"
)

// graph builds a small valid graph: x = embed(ids); y = x · Wᵀ.
func graph() *Graph {
	g := &Graph{Name: "t", Tokens: 4, Dyn: []string{"n"}}
	ids := g.AddTensor(Tensor{Name: "ids", DType: I32, Shape: []int64{4}, Role: Input})
	table := g.AddTensor(Tensor{Name: "table", DType: BF16, Shape: []int64{10, 8}, Role: Weight, Source: "embed"})
	x := g.AddTensor(Tensor{Name: "x", DType: F32, Shape: []int64{4, 8}, Role: Activation})
	w := g.AddTensor(Tensor{Name: "w", DType: BF16, Shape: []int64{6, 8}, Role: Weight, Source: "w"})
	y := g.AddTensor(Tensor{Name: "y", DType: F32, Shape: []int64{4, 6}, Role: Output})
	g.Ops = []*Op{
		{Kind: Embedding, Layer: -1, Rows: "n", Params: map[string]float64{"hidden": 8, "vocab": 10},
			Operands: []Operand{{Tensor: x.ID}, {Tensor: table.ID}, {Tensor: ids.ID}}},
		{Kind: MatMul, Layer: 0, Rows: "n", Params: map[string]float64{"k": 8, "n": 6},
			Operands: []Operand{{Tensor: y.ID}, {Tensor: x.ID}, {Tensor: w.ID}}},
	}
	return g
}

func TestVerify(t *testing.T) {
	if err := graph().Verify(); err != nil {
		t.Fatalf("valid graph: %v", err)
	}
	tests := []struct {
		name   string
		modify func(g *Graph)
		want   string
	}{
		{"unknown kind", func(g *Graph) { g.Ops[1].Kind = "conv3d" }, "unknown kind"},
		{"operand count", func(g *Graph) { g.Ops[1].Operands = g.Ops[1].Operands[:2] }, "2 operands, want 3"},
		{"missing parameter", func(g *Graph) { delete(g.Ops[1].Params, "k") }, "parameter k missing"},
		{"fractional extent", func(g *Graph) { g.Ops[1].Params["n"] = 2.5 }, "want an integer"},
		{"dtype", func(g *Graph) { g.Tensors[3].DType = F32 }, "is f32, want bf16"},
		{"out of bounds", func(g *Graph) { g.Ops[1].Params["n"] = 7 }, "reaches element"},
		{"offset out of bounds", func(g *Graph) { g.Ops[1].Operands[1].Offset = 1 }, "reaches element"},
		{"write to a weight", func(g *Graph) { g.Ops[1].Operands[0].Tensor = 3 }, "writes weight tensor w"},
		{"read before write", func(g *Graph) { g.Ops[0], g.Ops[1] = g.Ops[1], g.Ops[0] }, "reads activation x before any op writes it"},
		{"unknown dynamic scalar", func(g *Graph) { g.Ops[1].Rows = "m" }, "unknown dynamic scalar m"},
		{"unused tensor", func(g *Graph) {
			g.AddTensor(Tensor{Name: "spare", DType: F32, Shape: []int64{1}, Role: Activation})
		}, "tensor spare: never used"},
		{"duplicate name", func(g *Graph) { g.Tensors[4].Name = "x" }, "tensor x: duplicate name"},
		{"weight without source", func(g *Graph) { g.Tensors[1].Source = "" }, "weight without a checkpoint source"},
	}
	for _, tt := range tests {
		g := graph()
		tt.modify(g)
		err := g.Verify()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestDump(t *testing.T) {
	d := graph().Dump()
	for _, want := range []string{"graph t tokens=4 dyn=n", "%1 table bf16 [10 8] weight <- embed", "matmul(y=%4, x=%2, w=%3) k=8 n=6 rows=n"} {
		if !strings.Contains(d, want) {
			t.Errorf("dump lacks %q:\n%s", want, d)
		}
	}
}
