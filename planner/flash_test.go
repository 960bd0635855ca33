package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestFlashPrefill checks the flash pass: on the GPU targets every
// prefill attention and its output gate become one attention_prefill with
// the target's tile, reading q, the gate rows of qg and the caches and
// writing attention's output, with the target's first tile that fits and
// its precision (with an f32 cache q, k, v and p split on sm_90, while
// gfx1151's plans keep the pair, its VGPRs spent by the plain kernel; with a
// bf16 cache q and p split on sm_90; plain bf16 operands with flash-bf16);
// decode keeps its split pair; the cpu plan
// keeps attention unless asked (PrefillFlash), a GPU plan keeps it when
// asked (PrefillEager); the tiny fixtures' head_dim of 32 takes the
// tensor-core family, a head_dim the swizzled tiles do not serve (40, 96)
// keeps the pair; with q and p split over a bf16 cache head_dim 256 takes
// 32 positions (the registers), 128 takes 64.
func TestFlashPrefill(t *testing.T) {
	count := func(g *ir.Graph, k ir.Kind) int {
		n := 0
		for _, op := range g.Ops {
			if op.Kind == k {
				n++
			}
		}
		return n
	}
	graphs := func(c *arch.Config, target plan.Target, kv ir.DType, attn PrefillAttention) map[string]*ir.Graph {
		gs, err := Graphs(FromConfig("m", c), Options{Target: target, Buckets: []int{4}, ContextTokens: 64, KVDType: kv, PrefillAttention: attn}, "flash")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*ir.Graph{}
		for _, g := range gs {
			out[g.Name] = g
		}
		return out
	}
	tiny := *arch.Real()
	tiny.NumAttentionHeads, tiny.HeadDim = 4, 32
	odd := *arch.Real()
	odd.HeadDim = 40
	hd96 := *arch.Real()
	hd96.HeadDim = 96
	hd128 := *arch.Real()
	hd128.HeadDim = 128
	layers := 10
	for _, tc := range []struct {
		name   string
		c      *arch.Config
		target plan.Target
		kv     ir.DType
		attn   PrefillAttention
		fused  bool
		tile   [2]int64
		split  [3]bool // q, k and v, p
	}{
		{"real sm_90", arch.Real(), plan.SM90, ir.F32, PrefillDefault, true, [2]int64{128, 32}, [3]bool{true, true, true}},
		{"real sm_90 bf16", arch.Real(), plan.SM90, ir.BF16, PrefillFlashBF16, true, [2]int64{128, 64}, [3]bool{}},
		{"real gfx1151", arch.Real(), plan.GFX1151, ir.F32, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"real gfx1151 bf16", arch.Real(), plan.GFX1151, ir.BF16, PrefillFlashBF16, true, [2]int64{64, 16}, [3]bool{}},
		{"tiny heads sm_90", &tiny, plan.SM90, ir.F32, PrefillDefault, true, [2]int64{128, 64}, [3]bool{true, true, true}},
		{"tiny heads gfx1151", &tiny, plan.GFX1151, ir.F32, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"tiny heads gfx1151 bf16", &tiny, plan.GFX1151, ir.BF16, PrefillFlashBF16, true, [2]int64{64, 16}, [3]bool{}},
		{"head_dim 40 sm_90", &odd, plan.SM90, ir.F32, PrefillFlash, false, [2]int64{}, [3]bool{}},
		{"head_dim 96 sm_90 bf16", &hd96, plan.SM90, ir.BF16, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"head_dim 128 sm_90 bf16", &hd128, plan.SM90, ir.BF16, PrefillFlash, true, [2]int64{128, 64}, [3]bool{true, false, true}},
		{"real sm_90 eager", arch.Real(), plan.SM90, ir.F32, PrefillEager, false, [2]int64{}, [3]bool{}},
		{"real sm_90 flash-bf16", arch.Real(), plan.SM90, ir.F32, PrefillFlashBF16, true, [2]int64{128, 64}, [3]bool{}},
		{"real cpu", arch.Real(), plan.CPU, ir.F32, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"real sm_90 bf16 flash", arch.Real(), plan.SM90, ir.BF16, PrefillFlash, true, [2]int64{128, 32}, [3]bool{true, false, true}},
		{"real gfx1151 bf16 default", arch.Real(), plan.GFX1151, ir.BF16, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"tiny heads gfx1151 bf16 default", &tiny, plan.GFX1151, ir.BF16, PrefillDefault, false, [2]int64{}, [3]bool{}},
		{"tiny heads sm_90 bf16 flash", &tiny, plan.SM90, ir.BF16, PrefillFlash, true, [2]int64{128, 64}, [3]bool{true, false, true}},
		{"real cpu flash", arch.Real(), plan.CPU, ir.F32, PrefillFlash, true, [2]int64{128, 32}, [3]bool{true, true, true}},
	} {
		gs := graphs(tc.c, tc.target, tc.kv, tc.attn)
		pre, dec := gs["prefill_4"], gs["decode"]
		if n := count(dec, ir.AttentionPrefill); n != 0 {
			t.Errorf("%s: %d attention_prefill at decode", tc.name, n)
		}
		want := map[bool][3]int{true: {layers, 0, 0}, false: {0, layers, layers}}[tc.fused]
		got := [3]int{count(pre, ir.AttentionPrefill), count(pre, ir.Attention), count(pre, ir.AttnOutputGate)}
		if got != want {
			t.Errorf("%s: prefill has %v attention_prefill, attention, attn_output_gate; want %v", tc.name, got, want)
		}
		if !tc.fused {
			continue
		}
		for _, op := range pre.Ops {
			if op.Kind != ir.AttentionPrefill {
				continue
			}
			var names []string
			for _, o := range op.Operands {
				names = append(names, pre.Tensors[o.Tensor].Name)
			}
			kv := []string{"kv.3.k", "kv.3.v"}
			if op.Layer != 3 {
				continue
			}
			if diff := cmp.Diff(append([]string{"attn_o", "attn_q", "attn_qg"}, kv...), names); diff != "" {
				t.Errorf("%s: operands (-want +got):\n%s", tc.name, diff)
			}
			if tile := [2]int64{int64(op.Params.Int("block_m")), int64(op.Params.Int("block_n"))}; tile != tc.tile {
				t.Errorf("%s: tile %v, want %v", tc.name, tile, tc.tile)
			}
			if split := [3]bool{op.Params.Flag("split_q"), op.Params.Flag("split_kv"), op.Params.Flag("split_p")}; split != tc.split {
				t.Errorf("%s: split q, kv, p %v, want %v", tc.name, split, tc.split)
			}
		}
	}
}

// TestWGMMAPrefill checks the flash pass with PrefillWGMMA(BF16): on sm_90
// a bf16 cache's prefill
// attention at head_dim 256 or 128 becomes attention_prefill_wg with the
// 128 × 64 tile and two V buffers (two K buffers too without the splits),
// the precision of flash (q and p split), flash-bf16 (plain) or fp16; an f32 cache (the cpu's only one) and the tiny
// fixtures' head_dim of 32 keep attention_prefill (flash's), gfx1151 what
// flash gives it; decode keeps its split pair.
func TestWGMMAPrefill(t *testing.T) {
	tiny := *arch.Real()
	tiny.NumAttentionHeads, tiny.HeadDim = 4, 32
	hd128 := *arch.Real()
	hd128.HeadDim = 128
	type got struct {
		WG, Flash, Pair int
		Tile            [4]int // block_m, block_n, k_stages, v_stages of the first attention_prefill_wg
		Split, FP16     bool
	}
	const layers = 10
	for _, tc := range []struct {
		name   string
		c      *arch.Config
		target plan.Target
		kv     ir.DType
		attn   PrefillAttention
		want   got
	}{
		{"real sm_90 bf16", arch.Real(), plan.SM90, ir.BF16, PrefillWGMMA, got{layers, 0, 0, [4]int{128, 64, 1, 2}, true, false}},
		{"real sm_90 bf16 plain", arch.Real(), plan.SM90, ir.BF16, PrefillWGMMABF16, got{layers, 0, 0, [4]int{128, 64, 2, 2}, false, false}},
		{"real sm_90 bf16 fp16", arch.Real(), plan.SM90, ir.BF16, PrefillWGMMAFP16, got{layers, 0, 0, [4]int{128, 64, 2, 2}, false, true}},
		{"real sm_90 f32 fp16", arch.Real(), plan.SM90, ir.F32, PrefillWGMMAFP16, got{0, layers, 0, [4]int{}, false, false}},
		{"head_dim 128 sm_90 bf16", &hd128, plan.SM90, ir.BF16, PrefillWGMMA, got{layers, 0, 0, [4]int{128, 64, 2, 2}, true, false}},
		{"real cpu", arch.Real(), plan.CPU, ir.F32, PrefillWGMMA, got{0, layers, 0, [4]int{}, false, false}},
		{"real sm_90 f32", arch.Real(), plan.SM90, ir.F32, PrefillWGMMA, got{0, layers, 0, [4]int{}, false, false}},
		{"tiny heads sm_90 bf16", &tiny, plan.SM90, ir.BF16, PrefillWGMMA, got{0, layers, 0, [4]int{}, false, false}},
		{"real gfx1151 bf16", arch.Real(), plan.GFX1151, ir.BF16, PrefillWGMMA, got{0, 0, layers, [4]int{}, false, false}},
		{"real gfx1151 bf16 plain", arch.Real(), plan.GFX1151, ir.BF16, PrefillWGMMABF16, got{0, layers, 0, [4]int{}, false, false}},
		// the default: wgmma on sm_90 where it serves, flash where it does
		// not, flash on gfx1151, the pair on the cpu
		{"real sm_90 bf16 default", arch.Real(), plan.SM90, ir.BF16, PrefillDefault, got{layers, 0, 0, [4]int{128, 64, 1, 2}, true, false}},
		{"real sm_90 f32 default", arch.Real(), plan.SM90, ir.F32, PrefillDefault, got{0, layers, 0, [4]int{}, false, false}},
		{"tiny heads sm_90 bf16 default", &tiny, plan.SM90, ir.BF16, PrefillDefault, got{0, layers, 0, [4]int{}, false, false}},
		{"real gfx1151 bf16 default", arch.Real(), plan.GFX1151, ir.BF16, PrefillDefault, got{0, 0, layers, [4]int{}, false, false}},
		{"real cpu default", arch.Real(), plan.CPU, ir.F32, PrefillDefault, got{0, 0, layers, [4]int{}, false, false}},
	} {
		gs, err := Graphs(FromConfig("m", tc.c), Options{Target: tc.target, Buckets: []int{4}, ContextTokens: 64, KVDType: tc.kv, PrefillAttention: tc.attn}, "flash")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, g := range gs {
			var r got
			for _, op := range g.Ops {
				switch op.Kind {
				case ir.AttentionPrefillWG:
					if r.WG == 0 {
						r.Tile = [4]int{op.Params.Int("block_m"), op.Params.Int("block_n"), op.Params.Int("k_stages"), op.Params.Int("v_stages")}
						r.Split = op.Params.Flag("split_q") && op.Params.Flag("split_p")
						r.FP16 = op.Params.Flag("fp16")
					}
					r.WG++
				case ir.AttentionPrefill:
					r.Flash++
				case ir.AttnOutputGate:
					r.Pair++
				}
			}
			want := tc.want
			if !strings.HasPrefix(g.Name, "prefill") {
				want = got{Pair: r.Pair} // decode keeps its split pair
			}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", tc.name, g.Name, diff)
			}
		}
	}
}
