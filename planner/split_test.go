package planner

import (
	"fmt"
	"strings"
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
// activation, the combine taking the output gate, which then goes (the
// split two blocks per SM; with DecodeStream on sm_90 the streamed split,
// one block per SM: 66 splits; gfx1151 keeps the split); prefill keeps
// attention; the cpu plan keeps it unless asked (then with the plain
// combine and the gate: it does not fuse), and a negative count keeps it
// on a GPU. (The q/k norm folded into the split: TestFoldQKNorm.)
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
	type want struct {
		target         plan.Target
		kv             ir.DType
		stream         bool
		mma            DecodeMMA
		splits         int64
		split, combine ir.Kind
		warps, stages  int // attention_decode_mma's
	}
	for _, w := range []want{
		{plan.SM90, "", false, "", 66, ir.AttentionDecodeMMA, ir.AttentionCombineGate, 4, 3},
		{plan.SM90, "", false, DecodeMMAOn, 66, ir.AttentionDecodeMMA, ir.AttentionCombineGate, 4, 3},
		{plan.SM90, "", false, DecodeMMAOff, 132, ir.AttentionDecodeSplit, ir.AttentionCombineGate, 0, 0},
		{plan.SM90, ir.F32, false, DecodeMMAOn, 132, ir.AttentionDecodeSplit, ir.AttentionCombineGate, 0, 0},
		{plan.SM90, ir.F32, false, "", 132, ir.AttentionDecodeSplit, ir.AttentionCombineGate, 0, 0},
		{plan.SM90, "", true, "", 66, ir.AttentionDecodeStream, ir.AttentionCombineGate, 0, 0},
		{plan.GFX1151, "", false, "", 40, ir.AttentionDecodeSplit, ir.AttentionCombineGate, 0, 0},
		{plan.GFX1151, "", true, "", 40, ir.AttentionDecodeSplit, ir.AttentionCombineGate, 0, 0},
		{plan.GFX1151, "", false, DecodeMMAOn, 20, ir.AttentionDecodeMMA, ir.AttentionCombineGate, 2, 1},
	} {
		target, splits := w.target, w.splits
		gs := graphs(Options{Target: target, KVDType: w.kv, DecodeStream: w.stream, DecodeMMA: w.mma})
		dec := gs["decode"]
		if n := count(dec, ir.Attention); n != 0 {
			t.Errorf("%s: %d attention ops left at decode", target, n)
		}
		if a, b := count(dec, w.split), count(dec, w.combine); a != layers || b != layers {
			t.Errorf("%s: %d %s, %d %s, want %d each", target, a, w.split, b, w.combine, layers)
		}
		if n := count(dec, ir.AttnOutputGate); n != 0 {
			t.Errorf("%s: %d output gates left at decode", target, n)
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
			case w.split:
				p := op.Params
				if p.Int("splits") != int(splits) || p.Int("block_heads") != 8 || p.Int("split_align") != splitAlign {
					t.Errorf("%s: split params %s", target, p)
				}
				if w.split == ir.AttentionDecodeMMA && (p.Int("warps") != w.warps || p.Int("ring_stages") != w.stages) {
					t.Errorf("%s: attention_decode_mma params %s, want %d warps, %d stages", target, p, w.warps, w.stages)
				}
				next := dec.Ops[i+1]
				if next.Kind != w.combine || next.Operands[1] != op.Operands[0] ||
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
	if n, g := count(dec, ir.AttentionCombine), count(dec, ir.AttnOutputGate); n != layers || g != layers {
		t.Errorf("cpu with 5 splits: %d combines, %d gates", n, g)
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
			if op.Kind == ir.AttentionDecodeSplit || op.Kind == ir.AttentionCombine || op.Kind == ir.AttentionDecodeStream || op.Kind == ir.AttentionCombineGate {
				t.Fatalf("%s: %s for head_dim 8", g.Name, op.Kind)
			}
		}
	}
}

// TestDecodeMMAOption: an unknown mode is refused by name, and asking for
// the tensor-core split and the streamed split at once is refused.
func TestDecodeMMAOption(t *testing.T) {
	m := FromConfig("real", arch.Real())
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{DecodeMMA: "sideways"}, `decode mma "sideways"`},
		{Options{DecodeMMA: DecodeMMAOn, DecodeStream: true}, "decode mma on and decode stream"},
		{Options{DecodeMMA: DecodeMMAFused, DecodeStream: true}, "decode mma fused and decode stream"},
	} {
		c.o.Target, c.o.Buckets, c.o.ContextTokens = plan.SM90, []int{4}, 64
		_, err := Plan(m, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.o, err, c.want)
		}
	}
}

// TestSplitKVFused: with DecodeMMAFused the decode step's every attention
// and its output gate become one attention_decode_mma_gate (out, the
// records, q, the gates, the caches, the layer's own arrival counters: a
// state tensor of two counters per KV head's block), with no combine left.
func TestSplitKVFused(t *testing.T) {
	m := FromConfig("real", arch.Real())
	gs, err := Graphs(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64, DecodeMMA: DecodeMMAFused}, "split_kv")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name != "decode" {
			continue
		}
		var layers []string
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.AttentionCombineGate, ir.AttentionCombine, ir.AttnOutputGate, ir.Attention, ir.AttentionDecodeMMA:
				t.Errorf("%s left at decode", op.Kind)
			case ir.AttentionDecodeMMAGate:
				var names []string
				for _, o := range op.Operands {
					names = append(names, g.Tensors[o.Tensor].Name)
				}
				arr := g.Tensors[op.Operands[6].Tensor]
				if arr.Role != ir.State || arr.DType != ir.I32 || !cmp.Equal(arr.Shape, []int64{1, 4}) {
					t.Errorf("arrivals %+v", arr)
				}
				layers = append(layers, names[6])
				if diff := cmp.Diff([]string{"attn_o", "attn_partial", "attn_q"}, names[:3]); diff != "" {
					t.Errorf("operands (-want +got):\n%s", diff)
				}
			}
		}
		if len(layers) != 10 || layers[0] == layers[1] {
			t.Errorf("fused layers' counters %v, want 10 distinct", layers)
		}
	}
}

// TestFoldQKNorm: with QKFold, where the plan fuses, the decode step's every
// qk_norm_rope_append goes into the split after it — attention_decode_mma_qk
// on sm_90 (and gfx1151 with DecodeMMAOn), attention_decode_split_qk where
// the CUDA-core split runs (gfx1151, f32 KV, DecodeMMAOff) — with the
// norm's operands (qg, the caches, k, v, the norm weights), its rot_dim,
// eps and theta, one new row, and no q tensor left; without QKFold the pair stays,
// and the splits that take no fold (the streamed split, the split with the
// combine folded in) keep it too, as does the cpu plan (it does not fuse).
func TestFoldQKNorm(t *testing.T) {
	m := FromConfig("real", arch.Real())
	decode := func(o Options) *ir.Graph {
		o.Buckets, o.ContextTokens = []int{4}, 64
		gs, err := Graphs(m, o, "split_kv")
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
	kinds := func(g *ir.Graph) map[ir.Kind]int {
		n := map[ir.Kind]int{}
		for _, op := range g.Ops {
			n[op.Kind]++
		}
		return n
	}
	for _, c := range []struct {
		o          Options
		fold, kept ir.Kind // the folded kind (or "": none) and the split that stays otherwise
	}{
		{Options{Target: plan.SM90, QKFold: true}, ir.AttentionDecodeMMAQK, ""},
		{Options{Target: plan.SM90, QKFold: true, DecodeMMA: DecodeMMAOff}, ir.AttentionDecodeSplitQK, ""},
		{Options{Target: plan.SM90, QKFold: true, KVDType: ir.F32}, ir.AttentionDecodeSplitQK, ""},
		{Options{Target: plan.GFX1151, QKFold: true}, ir.AttentionDecodeSplitQK, ""},
		{Options{Target: plan.GFX1151, QKFold: true, DecodeMMA: DecodeMMAOn}, ir.AttentionDecodeMMAQK, ""},
		{Options{Target: plan.SM90}, "", ir.AttentionDecodeMMA},
		{Options{Target: plan.GFX1151}, "", ir.AttentionDecodeSplit},
		{Options{Target: plan.SM90, QKFold: true, DecodeStream: true, DecodeMMA: DecodeMMAOff}, "", ir.AttentionDecodeStream},
		{Options{Target: plan.SM90, QKFold: true, DecodeMMA: DecodeMMAFused}, "", ir.AttentionDecodeMMAGate},
		{Options{Target: plan.CPU, QKFold: true, DecodeSplits: 5}, "", ir.AttentionDecodeSplit},
	} {
		g := decode(c.o)
		n := kinds(g)
		if c.fold == "" {
			want := 10
			if c.o.Target == plan.CPU {
				want = 0 // the cpu plan keeps the unfused chain
			}
			if n[ir.QKNormRoPEAppend] != want || n[c.kept] != 10 || n[ir.AttentionDecodeMMAQK]+n[ir.AttentionDecodeSplitQK] != 0 {
				t.Errorf("%+v: %v, want the pair kept", c.o, n)
			}
			continue
		}
		if n[ir.QKNormRoPEAppend] != 0 || n[c.fold] != 10 || n[ir.AttentionDecodeMMA]+n[ir.AttentionDecodeSplit] != 0 {
			t.Errorf("%+v: %v, want 10 %s and no pair", c.o, n, c.fold)
		}
		if g.Tensor("attn_q") != nil {
			t.Errorf("%+v: attn_q is still planned", c.o)
		}
		for _, op := range g.Ops {
			if op.Kind != c.fold {
				continue
			}
			var names []string
			for _, o := range op.Operands {
				names = append(names, g.Tensors[o.Tensor].Name)
			}
			l := op.Layer
			want := []string{"attn_partial", "attn_in", fmt.Sprintf("kv.%d.k", l), fmt.Sprintf("kv.%d.v", l), "attn_in", "attn_in",
				fmt.Sprintf("layers.%d.self_attn.q_norm.weight", l), fmt.Sprintf("layers.%d.self_attn.k_norm.weight", l)}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Errorf("%+v: layer %d operands (-want +got):\n%s", c.o, l, diff)
			}
			if off := []int64{op.Operands[1].Offset, op.Operands[4].Offset, op.Operands[5].Offset}; !cmp.Equal(off, []int64{0, 8192, 8704}) {
				t.Errorf("%+v: qg, k, v at elements %v of attn_in", c.o, off)
			}
			p := op.Params
			if p.Int("rot_dim") != 64 || p.Int("new_rows") != 1 || p.Real("theta") != 1e7 || !p.Flag("one_plus") || p.Real("eps") != 1e-6 {
				t.Errorf("%+v: params %s", c.o, p)
			}
		}
	}
}
