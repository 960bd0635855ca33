package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
)

// attention_decode_mma is attention_decode_split on tensor cores
// (attention_decode_mma.tmpl, docs/decode-attention.md): the same
// operands, split ranges, records and reference, with q·kᵀ and p·v as
// bf16 matrix products over tiles of 16 positions that every warp streams
// through its own ring of shared memory. On CUDA cores the split is bound
// by the arithmetic of 8 query heads × head_dim per position; on tensor
// cores that work is a few products per tile, and the kernel can stream
// the cache at the memory's rate.

// MMATile is the positions of one K/V tile of attention_decode_mma (the m
// of Sᵀ = K·Qᵀ, the k of Oᵀ += Vᵀ·Pᵀ).
const MMATile = 16

// MMAHeadDimMax bounds head_dim: a lane holds head_dim / 4 words of q's
// fragments and head_dim / 4 accumulator floats (64 + 64 at 256).
const MMAHeadDimMax = 256

// MMABlockHeadsMax bounds block_heads: the n of the sm_90 product (gfx1151
// pads the heads to WMMA's 16).
const MMABlockHeadsMax = 8

// MMABlockHeads is the query heads of one KV head's group that an
// attention_decode_mma block serves: the largest divisor of the group up to
// MMABlockHeadsMax (the real model's group of 8 is one block).
func MMABlockHeads(group int) int {
	best := 1
	for b := 1; b <= min(group, MMABlockHeadsMax); b++ {
		if group%b == 0 {
			best = b
		}
	}
	return best
}

// DecodeMMASharedBytes is the dynamic shared memory of an
// attention_decode_mma block: every warp's ring of stages K and V tiles of
// MMATile rows (bf16), then q's hi and lo terms as two 16-row tiles (the
// gfx1151 path's WMMA operand; the warps' m and l at the merge).
func DecodeMMASharedBytes(p ir.Params) int {
	d := p.Int("head_dim")
	return (p.Int("warps")*p.Int("ring_stages")*2*MMATile*d + 2*16*d) * 2
}

// mmaStagesMax bounds a warp's ring: three tiles in flight cover the
// loaded latency at the real model's 16 KiB a tile.
const mmaStagesMax = 3

// DecodeMMAGeometry is the warps of an attention_decode_mma block and the
// stages of each warp's ring for head_dim d within the shared memory of
// launch configuration c: four warps (one per scheduler of an SM) and up to
// three stages (sm_90, 208 KiB at d = 256: one block per SM), else two
// warps and what fits (gfx1151's 64 KiB: one stage). ok is false where not
// even one stage of one warp fits.
func DecodeMMAGeometry(c ir.LaunchConfig, d int) (warps, stages int, ok bool) {
	for _, w := range []int{4, 2, 1} {
		free := c.MaxSharedBytes/2 - 2*16*d
		if st := min(mmaStagesMax, free/(w*2*MMATile*d)); st >= 1 && w*c.Warp <= c.Threads {
			return w, st, true
		}
	}
	return 0, 0, false
}

// DecodeMMAFits holds the shapes attention_decode_mma serves: a bf16 cache,
// head_dim 16, 32 or a multiple of 64 up to MMAHeadDimMax, block_heads up to
// MMABlockHeadsMax, 1 to 8 warps and 1 to 4 stages.
func DecodeMMAFits(p ir.Params) error {
	d := p.Int("head_dim")
	switch {
	case !p.Flag("kv_bf16"):
		return fmt.Errorf("attention_decode_mma reads a bf16 KV cache; this one is f32")
	case (d != 16 && d != 32 && d%64 != 0) || d > MMAHeadDimMax:
		// mma.tmpl's swizzle permutes a row's 16-byte chunks within groups
		// of up to 8: 2, 4 or a multiple of 8 chunks a row.
		return fmt.Errorf("head_dim %d is not 16, 32 or a multiple of 64 up to %d (the tensor-core tiles)", d, MMAHeadDimMax)
	case p.Int("block_heads") > MMABlockHeadsMax:
		return fmt.Errorf("block_heads %d exceeds the %d columns of the product", p.Int("block_heads"), MMABlockHeadsMax)
	case p.Int("warps") < 1 || p.Int("warps") > 8:
		return fmt.Errorf("warps %d: want 1 to 8", p.Int("warps"))
	case p.Int("ring_stages") < 1 || p.Int("ring_stages") > 4:
		return fmt.Errorf("ring_stages %d: want 1 to 4", p.Int("ring_stages"))
	}
	return nil
}

func attentionDecodeMMA() *ir.Family {
	f := splitFamily(ir.AttentionDecodeMMA, DecodeMMAFits)
	f.Params = cat(f.Params, ir.Ints("warps", "ring_stages"))
	// One block of warps warps per (split, KV head's block of query heads,
	// row), the rings in dynamic shared memory.
	f.Launch = func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
		s := c.Blocks(p.Int("splits"), p.Int("q_heads")/p.Int("block_heads"), rows)
		s.Block[0] = p.Int("warps") * c.Warp
		s.SharedBytes = DecodeMMASharedBytes(p)
		return s
	}
	f.Reference = mmaReference
	f.TemplateData = func(ir.Params) map[string]any { return map[string]any{"gate": false, "fold": false} }
	return f
}

// mmaReference is the split's reference on the cache's values (a bf16
// cache widened).
func mmaReference(a *ir.Args) error {
	pos := int(a.Slot(ir.ParamPos))
	if pos < 0 || pos+a.N > a.Int("capacity") {
		return fmt.Errorf("attention past the KV cache: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
	}
	kc, vc := cacheF32(a, "k_cache"), cacheF32(a, "v_cache")
	AttentionDecodeSplit(a.F32("partial"), a.F32("q"), kc, vc, a.N, pos,
		a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim"), a.Real32("scale"), a.Int("splits"), a.Int("split_align"))
	return nil
}

// DecodeMMAGateMerge is where the merge of an attention_decode_mma_gate
// block keeps its scratch in dynamic shared memory, in floats from its
// start: the warps' sums of a head (wacc, [warps][head_dim], read and
// written as 16-byte vectors, so it leads at offset 0 and each warp's row
// starts 16-byte aligned), then the splits' weights (w, [splits]) and the
// warps' reductions (red, [warps]). floats is the scratch's size. (With
// the weights first, a split count that is not a multiple of four put
// wacc's vectors off their 16-byte alignment: the H200 faulted with a
// misaligned address at 66, 2 and 3 splits.)
func DecodeMMAGateMerge(p ir.Params) (wacc, w, red, floats int) {
	d, warps := p.Int("head_dim"), p.Int("warps")
	w = warps * d
	red = w + p.Int("splits")
	return 0, w, red, red + warps
}

// DecodeMMAGateSharedBytes is the dynamic shared memory of an
// attention_decode_mma_gate block: the split's, or the merge's scratch
// (DecodeMMAGateMerge), whichever is larger.
func DecodeMMAGateSharedBytes(p ir.Params) int {
	_, _, _, floats := DecodeMMAGateMerge(p)
	return max(DecodeMMASharedBytes(p), floats*4)
}

// attentionDecodeMMAGate is attention_decode_mma followed by
// attention_combine_gate in one launch (attention_decode_mma.tmpl with
// gate): the partial records as the split's, then out as the combine's
// with the output gate. arrivals holds two counters per (row, KV head's
// block of heads), zero between launches.
func attentionDecodeMMAGate() *ir.Family {
	f := attentionDecodeMMA()
	f.Kind = ir.AttentionDecodeMMAGate
	f.Template = "attention_decode_mma.tmpl"
	split := f.Operands
	f.Operands = []ir.OperandSpec{
		{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
		split[0], split[1],
		{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
			return rows * 2 * int64(p.Int("q_heads")*p.Int("head_dim"))
		}},
		split[2], split[3],
		{Name: "arrivals", DType: ir.I32, Access: ir.ReadWrite, Extent: func(p ir.Params, rows int64) int64 {
			return rows * 2 * int64(p.Int("q_heads")/p.Int("block_heads"))
		}},
	}
	launch := f.Launch
	f.Launch = func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
		s := launch(p, rows, c)
		s.SharedBytes = DecodeMMAGateSharedBytes(p)
		return s
	}
	f.Reference = func(a *ir.Args) error {
		for i, c := range a.I32("arrivals")[:2*a.N*(a.Int("q_heads")/a.Int("block_heads"))] {
			if c != 0 {
				return fmt.Errorf("attention_decode_mma_gate: arrival counter %d is %d, want 0 (a launch did not finish)", i, c)
			}
		}
		if err := mmaReference(a); err != nil {
			return err
		}
		out := a.F32("out")
		AttentionCombine(out, a.F32("partial"), a.N, a.Int("q_heads"), a.Int("head_dim"), a.Int("splits"))
		AttnOutputGate(out, a.F32("qg"), a.N, a.Int("q_heads"), a.Int("head_dim"))
		return nil
	}
	f.TemplateData = func(p ir.Params) map[string]any {
		wacc, w, red, _ := DecodeMMAGateMerge(p)
		return map[string]any{"gate": true, "fold": false, "merge_wacc": wacc, "merge_w": w, "merge_red": red}
	}
	return f
}

// cacheF32 is a KV cache operand as f32 values: itself, or a bf16 cache
// widened.
func cacheF32(a *ir.Args, name string) []float32 {
	if !a.Flag("kv_bf16") {
		return a.F32(name)
	}
	h := a.BF16(name)
	v := make([]float32, len(h))
	for i, x := range h {
		v[i] = bf16.ToFloat32(x)
	}
	return v
}
