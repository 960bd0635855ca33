package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The flash pass: on GPU targets the prefill step's attention (one block
// per query head and row, CUDA cores) followed by its output gate becomes
// one attention_prefill, flash attention on tensor cores with the gate in
// its epilogue (docs/prefill-attention.md). The decode step keeps the
// split pair, the cpu plan attention, the oracle; a shape the tensor-core
// tile does not serve keeps the pair as well.

// PrefillAttention says which family runs the prefill steps' attention.
type PrefillAttention string

const (
	PrefillDefault PrefillAttention = ""      // wgmma on sm_90, flash on the other GPU targets, eager on the cpu (the oracle)
	PrefillFlash   PrefillAttention = "flash" // attention_prefill on every target (on the cpu its reference: attention, then the gate)
	// PrefillFlashBF16 is attention_prefill with q, k, v and p as single
	// bf16 terms (as HuggingFace's bf16 attention): the fastest, at a cost in
	// agreement with the f32 oracle (0.026 max KLD on the tiny fixture).
	PrefillFlashBF16 PrefillAttention = "flash-bf16"
	PrefillEager     PrefillAttention = "eager" // attention and attn_output_gate
	// PrefillWGMMA is attention_prefill_wg (sm_90a's warpgroup products,
	// docs/prefill-attention.md) where it serves the op — a bf16 cache,
	// head_dim a multiple of 64 — with flash's precision (q and p split),
	// and flash elsewhere; PrefillWGMMABF16 the same with plain bf16
	// operands (flash-bf16's precision), PrefillWGMMAFP16 with q, k, v and
	// p as one fp16 term each (11 bits: a product each instead of split's
	// two, values saturated at fp16's ±65504; flash where it does not
	// serve). PrefillWGMMA is sm_90's default.
	PrefillWGMMA     PrefillAttention = "wgmma"
	PrefillWGMMABF16 PrefillAttention = "wgmma-bf16"
	PrefillWGMMAFP16 PrefillAttention = "wgmma-fp16"
)

// PrefillAttentions are the values Options.PrefillAttention takes besides
// the default, as the command line spells them.
var PrefillAttentions = []PrefillAttention{PrefillFlash, PrefillFlashBF16, PrefillWGMMA, PrefillWGMMABF16, PrefillWGMMAFP16, PrefillEager}

// prefillWGMMA says whether the options ask for attention_prefill_wg: by
// name, or by default on a target with its tiles (sm_90, where it measured
// 18,264 → 18,816 tok/s at 8K and 14,622 → 16,260 at 32K on the H200 with
// flash's precision: docs/prefill-attention.md).
func (o *Options) prefillWGMMA() bool {
	return o.PrefillAttention == PrefillWGMMA || o.PrefillAttention == PrefillWGMMABF16 || o.PrefillAttention == PrefillWGMMAFP16 ||
		(o.PrefillAttention == PrefillDefault && o.Target.GPU() && len(wgTiles[o.Target]) > 0)
}

// plainPrefill says whether the options ask for plain bf16 operands.
func (o *Options) plainPrefill() bool {
	return o.PrefillAttention == PrefillFlashBF16 || o.PrefillAttention == PrefillWGMMABF16
}

func (o *Options) flash() bool {
	// A GPU plan takes it by default with either cache: the operands that are
	// not exact bf16 already (q and p; an f32 cache's k and v too) are split
	// into two bf16 terms, within the oracle's agreement (a target that
	// cannot split them keeps the pair: prefillParams).
	return o.PrefillAttention == PrefillFlash || o.PrefillAttention == PrefillFlashBF16 || o.prefillWGMMA() ||
		(o.PrefillAttention == PrefillDefault && o.Target.GPU())
}

// prefillTile is an attention_prefill tile: packed (token, query head)
// rows and positions per block.
type prefillTile struct{ m, n int }

// prefillTiles are a target's tiles, best first; the first whose shared
// memory fits the target (and, with q and p split over a bf16 cache, whose
// registers do: splitLiveMax) is taken. sm_90 runs 8 warps of 16 rows on 64
// positions (147 KB at head_dim 256 plain), or on 32 when an f32 cache's
// split doubles the K and V tiles or a bf16 cache's split q and p need the
// registers (172 KB);
// gfx1151 runs 16-position tiles in its 64 KiB of LDS, 4 waves (plain
// bf16 operands only: prefillSplits). sm_90's last, 16 positions, is
// flush_k's where its partial sum leaves no registers for 32 (flushLive).
// The cpu runs the reference, whatever the tile: it takes sm_90's.
var prefillTiles = map[plan.Target][]prefillTile{
	plan.SM90:    {{128, 64}, {128, 32}, {64, 32}, {128, 16}},
	plan.GFX1151: {{64, 16}},
	plan.CPU:     {{128, 64}, {128, 32}, {64, 32}, {128, 16}},
}

// flushAttention are the targets whose attention_prefill takes flush_k
// when the plan flushes every tensor-core sum (TCSumsFlushAll): sm_90 (the
// WMMA path's reordered p·v spills on gfx1151) and the cpu, which runs
// the reference.
var flushAttention = map[plan.Target]bool{plan.SM90: true, plan.CPU: true}

// flushLive is what flush_k adds to a lane's live accumulators: one 16 ×
// 16 atom of p·v's partial sum (8 floats), counted against splitLiveMax —
// at head_dim 256 over a bf16 cache with q and p split that takes the
// 16-position tile (128 + 8 + 8).
const flushLive = 8

// The precision of attention_prefill: q, k, v and p each enter the tensor
// cores as one bf16 term or split into two (hi = bf16(x), lo = bf16(x −
// hi)), so that the GPU computes what the f32 oracle does to ≈ 16 bits, not
// 8. On the tiny fixture (max per-position KLD against the oracle, CPU
// emulation) plain bf16 q, k, v and p cost 0.026: k and v 0.024, q 0.0027,
// p 0.0017; all four split, 7e-9. A bf16 cache's k and v are exact bf16
// already (what the oracle reads from that cache), so a bf16 KV plan splits
// q and p only: twice a plain kernel's products, no more fragments live (the
// lo terms are built after the hi products; docs/prefill-attention.md). An
// f32 KV plan (the precise one) splits k and v too where the target can
// (sm_90: three times the products of a plain kernel). gfx1151's 256 VGPRs
// per lane are spent at head_dim 256 by the plain kernel (249): a split p
// spills there (its lo fragment, or a second pass whose V fragments the
// compiler keeps from the first), so its plans keep attention and the gate
// unless asked for plain operands (flash-bf16).
type prefillSplit struct{ qp, kv bool }

var prefillSplits = map[plan.Target]prefillSplit{
	plan.SM90:    {qp: true, kv: true},
	plan.GFX1151: {},
	plan.CPU:     {qp: true, kv: true},
}

// wgTiles are attention_prefill_wg's tiles, best first, on the targets
// that have it (sm_90a; the cpu runs its reference): two warpgroups of 64
// rows over 64 positions (with q split, 242 registers at head_dim 256 and
// two V buffers in 225 KiB; plain or fp16 operands take two K buffers as
// well), then 32 positions, then one warpgroup.
var wgTiles = map[plan.Target][]prefillTile{
	plan.SM90: {{128, 64}, {128, 32}, {64, 64}},
	plan.CPU:  {{128, 64}, {128, 32}, {64, 64}},
}

// wgParams turns attention_prefill parameters (prefillParams') into
// attention_prefill_wg's with the first tile that fits the target (with
// fp16, q, k, v and p as one fp16 term each instead of fp's precision); ok
// is false when the op's cache or head_dim is not the family's (an f32
// cache, head_dim not a multiple of 64) or no tile fits.
func wgParams(fp ir.Params, target plan.Target, fp16 bool, c ir.LaunchConfig) (ir.Params, bool) {
	if !fp.Flag("kv_bf16") || fp.Flag("split_kv") {
		return ir.Params{}, false
	}
	for _, t := range wgTiles[target] {
		if kernels.WGShape(fp.Int("head_dim"), t.m, t.n) != nil {
			continue
		}
		wp := fp.Clone()
		wp.SetFlag("fp16", fp16)
		if fp16 {
			wp.SetFlag("split_q", false)
			wp.SetFlag("split_p", false)
		}
		wp.SetInt("block_m", int64(t.m))
		wp.SetInt("block_n", int64(t.n))
		ks, vs := kernels.WGStages(wp, c.MaxSharedBytes)
		wp.SetInt("k_stages", int64(ks))
		wp.SetInt("v_stages", int64(vs))
		if kernels.WGSharedBytes(wp) <= c.MaxSharedBytes {
			return wp, true
		}
	}
	return ir.Params{}, false
}

// splitLiveMax bounds a lane's accumulator and score registers (head_dim/2
// + block_n/2) in a sm_90 kernel with q and p split over a bf16 cache:
// measured on the H200 at head_dim 256, 128 × 64 (128 + 32) took 255
// registers and spilled 24 bytes, 128 × 32 (128 + 16) 254 without spills
// (4.19 ms a layer at 8K against plain bf16's 2.79 and the eager pair's
// 79). Smaller heads take 64 positions (head_dim 128: 64 + 32).
const splitLiveMax = 144

// prefillParams are the attention_prefill parameters of an attention op:
// its own, the precision above (none with plain), and the first tile that
// fits; ok is false when none does or the precision needs splits the target
// cannot make.
func prefillParams(p ir.Params, target plan.Target, plain, flush bool, tiles []prefillTile, c ir.LaunchConfig) (ir.Params, bool) {
	splitQP := !plain
	splitKV := !plain && !p.Flag("kv_bf16")
	can := prefillSplits[target]
	if splitQP && !can.qp || splitKV && !can.kv {
		return ir.Params{}, false
	}
	live := splitLiveMax
	if flush {
		live -= flushLive
	}
	for _, t := range tiles {
		if splitQP && !splitKV && p.Int("head_dim")/2+t.n/2 > live {
			continue
		}
		fp := p.Clone()
		fp.SetInt("block_m", int64(t.m))
		fp.SetInt("block_n", int64(t.n))
		fp.SetFlag("split_q", splitQP)
		fp.SetFlag("split_p", splitQP)
		fp.SetFlag("split_kv", splitKV)
		setFlush(&fp, flush, false)
		if kernels.PrefillSharedBytes(fp) <= c.MaxSharedBytes {
			return fp, true
		}
	}
	return ir.Params{}, false
}

func flashPass(c *compilation) error {
	tiles, ok := prefillTiles[c.o.Target]
	if !ok || !c.o.flash() {
		return nil
	}
	limits := c.o.Target.Launch()
	if !c.o.Target.GPU() {
		limits = plan.SM90.Launch()
	}
	for i, g := range c.graphs {
		if c.steps[i].Kind != plan.Prefill {
			continue
		}
		flush := c.o.flushAll() && flushAttention[c.o.Target]
		if flashPrefillAttention(g, c.o.Target, c.o.plainPrefill(), flush, c.o.prefillWGMMA(), c.o.PrefillAttention == PrefillWGMMAFP16, tiles, limits) == 0 {
			continue
		}
		if err := g.Verify(kernels.Families); err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
	}
	return nil
}

// flashPrefillAttention rewrites every attention op of g whose output the
// next op to touch it gates in place (attn_output_gate over the same rows,
// heads and head_dim, its gate rows untouched in between) into
// attention_prefill, when head_dim suits the
// tensor-core tiles (kernels.PrefillTileDim, up to kernels.PrefillHeadDimMax) and
// a tile's shared memory fits the target (prefillParams); with wg, into
// attention_prefill_wg where that family serves the op (wgParams). With
// flush attention_prefill takes flush_k (attention_prefill_wg has none: its
// accumulators leave no registers for a second set). It returns the number
// of rewrites.
func flashPrefillAttention(g *ir.Graph, target plan.Target, plain, flush, wg, fp16 bool, tiles []prefillTile, c ir.LaunchConfig) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i, op := range g.Ops {
		if op.Kind != ir.Attention || op.Rows == nil {
			continue
		}
		p := op.Params
		d := p.Int("head_dim")
		if !kernels.PrefillTileDim(d) || d > kernels.PrefillHeadDimMax {
			continue
		}
		o := op.Operands[0]
		j := u.next(o.Tensor, i)
		if j < 0 {
			continue
		}
		gate := g.Ops[j]
		if gate.Kind != ir.AttnOutputGate || gate.Rows == nil || *gate.Rows != *op.Rows || gate.Layer != op.Layer ||
			gate.Operands[0] != o || gate.Params.Int("heads") != p.Int("q_heads") || gate.Params.Int("head_dim") != d {
			continue
		}
		qg := gate.Operands[1]
		if qg.Tensor == o.Tensor || u.next(qg.Tensor, i) != j { // the gate moves up to the attention's place
			continue
		}
		fp, ok := prefillParams(p, target, plain, flush, tiles, c)
		if !ok {
			continue
		}
		kind := ir.AttentionPrefill
		if wg {
			base := fp.Clone()
			delete(base.Flags, "flush_k")
			if wp, ok := wgParams(base, target, fp16, c); ok {
				kind, fp = ir.AttentionPrefillWG, wp
			}
		}
		g.Ops[i] = &ir.Op{Kind: kind, Layer: op.Layer, Rows: op.Rows, Params: fp,
			Operands: []ir.Operand{o, op.Operands[1], qg, op.Operands[2], op.Operands[3]}}
		drop[j] = true
		n++
	}
	dropOps(g, drop)
	return n
}
