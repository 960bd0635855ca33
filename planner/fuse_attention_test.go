package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// qkFused turns the op counts of a lowered decode step into those after
// the q/k norm + RoPE + append rule: each attention layer's two norms, two
// ropes and append become one qk_norm_rope_append.
func qkFused(counts map[ir.Kind]int) {
	layers := counts[ir.KVAppend]
	counts[ir.QKNormRoPEAppend] = layers
	counts[ir.RMSNorm] -= 2 * layers
	counts[ir.RoPE] -= 2 * layers
	delete(counts, ir.KVAppend)
	delete(counts, ir.RoPE)
}

// TestFuseQKNormRoPE checks the rule on the real model: on both GPU
// targets every attention layer's decode chain becomes one
// qk_norm_rope_append with the chain's operands and parameters (either KV
// dtype), nothing else changes, prefill keeps the chain; the cpu plan
// fuses only when forced; a chain whose k is read again after the append
// keeps its five ops.
func TestFuseQKNormRoPE(t *testing.T) {
	m := FromConfig("real", arch.Real())
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		for _, kv := range []ir.DType{ir.F32, ir.BF16} {
			o := Options{Target: target, Buckets: []int{4}, ContextTokens: 64, KVDType: kv}
			lowered, err := Graphs(m, o, "lower")
			if err != nil {
				t.Fatal(err)
			}
			fused, err := Graphs(m, o, "fuse")
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range fused {
				want := kindCounts(lowered[i])
				got := kindCounts(g)
				if g.Name != "decode" && g.Name != "decode_greedy" { // both decode steps fuse it
					if got[ir.QKNormRoPEAppend] != 0 || got[ir.KVAppend] != want[ir.KVAppend] {
						t.Errorf("%s %s: %s fuses the q/k chain", target, kv, g.Name)
					}
					continue
				}
				if got[ir.QKNormRoPEAppend] != 10 || got[ir.KVAppend] != 0 || got[ir.RoPE] != 0 {
					t.Errorf("%s %s: decode has %d fused chains, %d appends, %d ropes; want 10, 0, 0", target, kv,
						got[ir.QKNormRoPEAppend], got[ir.KVAppend], got[ir.RoPE])
				}
				for _, op := range g.Ops {
					if op.Kind != ir.QKNormRoPEAppend || op.Layer != 3 {
						continue
					}
					var names []string
					for _, x := range op.Operands {
						names = append(names, g.Tensors[x.Tensor].Name)
					}
					p := "layers.3.self_attn."
					// q|gate, k and v are slices of the concatenated projection's output (fuseProjections).
					wantNames := []string{"attn_q", "kv.3.k", "kv.3.v", "attn_in", "attn_in", "attn_in", p + "q_norm.weight", p + "k_norm.weight"}
					if diff := cmp.Diff(wantNames, names); diff != "" {
						t.Errorf("%s %s: layer 3 operands (-want +got):\n%s", target, kv, diff)
					}
					pr := op.Params
					if pr.Int("q_heads") != 16 || pr.Int("kv_heads") != 2 || pr.Int("head_dim") != 256 || pr.Int("rot_dim") != 64 ||
						pr.Int("capacity") != 64 || pr.Flag("kv_bf16") != (kv == ir.BF16) || !pr.Flag("one_plus") || pr.Real("theta") != m.Config.RopeTheta {
						t.Errorf("%s %s: params %s", target, kv, pr)
					}
				}
			}
		}
	}
	cpu := func(f Fusion) int {
		gs, err := Graphs(m, Options{Target: plan.CPU, Buckets: []int{4}, ContextTokens: 64, Fusion: f}, "fuse")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.Name == "decode" {
				return kindCounts(g)[ir.QKNormRoPEAppend]
			}
		}
		return -1
	}
	if a, b := cpu(FuseDefault), cpu(FuseOn); a != 0 || b != 10 {
		t.Errorf("cpu: %d fused chains by default, %d when forced; want 0, 10", a, b)
	}

	// k read after the append: the chain stays.
	gs, err := Graphs(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64}, "lower")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name != "decode" {
			continue
		}
		for i, op := range g.Ops {
			if op.Kind == ir.KVAppend && op.Layer == 3 {
				k := op.Operands[2]
				reader := &ir.Op{Kind: ir.Add, Layer: 3, Rows: op.Rows, Params: ir.Params{Ints: map[string]int64{"width": 512}},
					Operands: []ir.Operand{op.Operands[3], k}}
				g.Ops = append(g.Ops[:i+1], append([]*ir.Op{reader}, g.Ops[i+1:]...)...)
				break
			}
		}
		if n := fuseQKNormRoPE(g); n != 9 {
			t.Errorf("with layer 3's k read after the append: %d rewrites, want 9", n)
		}
	}
}
