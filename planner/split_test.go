package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestSplitKV checks the split_kv pass on the real model: on the GPU
// targets the decode step's every attention becomes a split (splits from
// the target's multiprocessors, the group of 8 heads in one block) and a
// combine that writes attention's output, through one attn_partial
// activation; prefill keeps attention; the cpu plan keeps it unless asked,
// and a negative count keeps it on a GPU.
func TestSplitKV(t *testing.T) {
	m := FromConfig("real", arch.Real())
	graphs := func(o Options) map[string]*ir.Graph {
		o.Buckets, o.ContextTokens = []int{4}, 64
		gs, err := Graphs(m, o, "split_kv")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*ir.Graph{}
		for _, g := range gs {
			out[g.Name] = g
		}
		return out
	}
	count := func(g *ir.Graph, k ir.Kind) int {
		n := 0
		for _, op := range g.Ops {
			if op.Kind == k {
				n++
			}
		}
		return n
	}
	layers := 10 // full-attention layers of the real model
	for target, splits := range map[plan.Target]int64{plan.SM90: 132, plan.GFX1151: 40} {
		gs := graphs(Options{Target: target})
		dec := gs["decode"]
		if n := count(dec, ir.Attention); n != 0 {
			t.Errorf("%s: %d attention ops left at decode", target, n)
		}
		if a, b := count(dec, ir.AttentionDecodeSplit), count(dec, ir.AttentionCombine); a != layers || b != layers {
			t.Errorf("%s: %d splits, %d combines, want %d each", target, a, b, layers)
		}
		if n := count(gs["prefill_4"], ir.Attention); n != layers {
			t.Errorf("%s: prefill has %d attention ops, want %d", target, n, layers)
		}
		partial := dec.Tensor("attn_partial")
		if partial == nil || partial.Role != ir.Activation || partial.DType != ir.F32 {
			t.Fatalf("%s: attn_partial %+v", target, partial)
		}
		if diff := cmp.Diff([]int64{1, 16 * splits * 260}, partial.Shape); diff != "" {
			t.Errorf("%s: attn_partial shape (-want +got):\n%s", target, diff)
		}
		for i, op := range dec.Ops {
			switch op.Kind {
			case ir.AttentionDecodeSplit:
				p := op.Params
				if p.Int("splits") != int(splits) || p.Int("block_heads") != 8 || p.Int("split_align") != splitAlign {
					t.Errorf("%s: split params %s", target, p)
				}
				next := dec.Ops[i+1]
				if next.Kind != ir.AttentionCombine || next.Operands[1] != op.Operands[0] ||
					dec.Tensors[next.Operands[0].Tensor].Name != "attn_o" || dec.Tensors[op.Operands[1].Tensor].Name != "attn_q" {
					t.Errorf("%s: op %d: the split is not followed by its combine into attn_o", target, i)
				}
			}
		}
		if n := count(graphs(Options{Target: target, DecodeSplits: -1})["decode"], ir.Attention); n != layers {
			t.Errorf("%s: DecodeSplits -1 leaves %d attention ops, want %d", target, n, layers)
		}
	}
	if n := count(graphs(Options{Target: plan.CPU})["decode"], ir.Attention); n != layers {
		t.Errorf("cpu: %d attention ops at decode, want %d (the oracle)", n, layers)
	}
	dec := graphs(Options{Target: plan.CPU, DecodeSplits: 5})["decode"]
	for _, op := range dec.Ops {
		if op.Kind == ir.AttentionDecodeSplit && op.Params.Int("splits") != 5 {
			t.Errorf("cpu with 5 splits: %s", op.Params)
		}
	}
	if n := count(dec, ir.AttentionCombine); n != layers {
		t.Errorf("cpu with 5 splits: %d combines", n)
	}
}

// TestSplitKVKeepsUnservedHeads: a head_dim that is not a multiple of a
// warp's 32 lanes (the tiny test config's 8) keeps attention.
func TestSplitKVKeepsUnservedHeads(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	gs, err := Graphs(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64}, "split_kv")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		for _, op := range g.Ops {
			if op.Kind == ir.AttentionDecodeSplit || op.Kind == ir.AttentionCombine {
				t.Fatalf("%s: %s for head_dim 8", g.Name, op.Kind)
			}
		}
	}
}
