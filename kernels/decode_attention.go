package kernels

import (
	"fmt"
	"math"

	"github.com/aimaproject/aimac/ir"
)

// Split-KV decode attention (flash-decoding). attention runs one block per
// query head over the whole context, which leaves a GPU idle at decode (16
// blocks) and reads every K/V row once per query head. The split pair
// instead runs a block per (split of the context, KV head's group of query
// heads): each K/V row is read once per KV head, and the context [0, pos+t]
// spreads over SPLITS blocks per group. attention_decode_split writes, per
// (row, query head, split), the split's running max m, its sum l of
// e^(score-m) and its unnormalized accumulator Σ e^(score-m)·v;
// attention_combine merges the partial softmaxes into attention's out.
// attention stays the oracle: Combine(Split(...)) equals Attention within
// float tolerance.

// PartialStride is the floats of one partial record: the head_dim
// accumulator, then m and l, then two floats of padding that keep every
// record 16-byte aligned (head_dim is a multiple of 4).
func PartialStride(headDim int) int { return headDim + 4 }

// SplitRange is the contiguous range [lo, hi) of positions that split s of
// splits covers in a context of ctx positions: ⌈ctx / splits⌉ rounded up
// to a multiple of align per split, so at short contexts the leading splits
// take align positions each and the trailing ones get none (lo = hi).
func SplitRange(ctx, splits, align, s int) (lo, hi int) {
	chunk := (ctx + splits - 1) / splits
	chunk = (chunk + align - 1) / align * align
	lo = min(s*chunk, ctx)
	return lo, min(lo+chunk, ctx)
}

// AttentionDecodeSplit writes the partial softmax of every (row t, query
// head h, split s) into partial, record ((t·hq + h)·splits + s) of
// PartialStride(d) floats: query t (absolute position pos0+t) over the cache
// positions SplitRange(pos0+t+1, splits, align, s) of kv head h/(hq/hkv):
// m = max of q·k·scale, l = Σ e^(q·k·scale − m), acc = Σ e^(q·k·scale − m)·v.
// A split without positions writes m = l = 0 (the neutral partial) and
// leaves its accumulator as it was: attention_combine never reads it.
func AttentionDecodeSplit(partial, q, kCache, vCache []float32, n, pos0, hq, hkv, d int, scale float32, splits, align int) {
	if n <= 0 {
		return
	}
	group := hq / hkv
	rec := PartialStride(d)
	parallelFor(n*hq, 2*(pos0+n)*d, func(lo, hi int) {
		scores := make([]float32, pos0+n)
		for item := lo; item < hi; item++ {
			t, h := item/hq, item%hq
			kvh := h / group
			qv := q[item*d:][:d]
			ctx := pos0 + t + 1
			for s := range splits {
				r := partial[(item*splits+s)*rec:][:rec]
				a, b := SplitRange(ctx, splits, align, s)
				if a == b {
					r[d], r[d+1] = 0, 0
					continue
				}
				sc := scores[a:b]
				m := float32(math.Inf(-1))
				for i := range sc {
					sc[i] = dot(qv, kCache[((a+i)*hkv+kvh)*d:][:d]) * scale
					m = max(m, sc[i])
				}
				acc := r[:d]
				clear(acc)
				var l float32
				for i := range sc {
					e := expf(sc[i] - m)
					l += e
					axpy(acc, e, vCache[((a+i)*hkv+kvh)*d:][:d])
				}
				r[d], r[d+1] = m, l
			}
		}
	})
}

// AttentionCombine merges the splits' partial softmaxes of every (row,
// query head) into out [n][hq][d], attention's layout: with M the largest m
// of the splits with l > 0 and w_s = e^(m_s − M), out = Σ w_s·acc_s / Σ
// w_s·l_s over those splits. A split whose weight underflows to 0
// contributes nothing (its accumulator is not read); a row and head without
// any such split gets zeros.
func AttentionCombine(out, partial []float32, n, hq, d, splits int) {
	rec := PartialStride(d)
	parallelFor(n*hq, splits*d, func(lo, hi int) {
		w := make([]float32, splits)
		for item := lo; item < hi; item++ {
			recs := partial[item*splits*rec:][:splits*rec]
			m := float32(math.Inf(-1))
			for s := range splits {
				if recs[s*rec+d+1] > 0 {
					m = max(m, recs[s*rec+d])
				}
			}
			var sum float32
			for s := range splits {
				w[s] = 0
				if l := recs[s*rec+d+1]; l > 0 {
					w[s] = expf(recs[s*rec+d] - m)
					sum += l * w[s]
				}
			}
			o := out[item*d:][:d]
			clear(o)
			for s := range splits {
				if w[s] > 0 {
					axpy(o, w[s], recs[s*rec:][:d])
				}
			}
			if sum > 0 { // no split had positions: zeros (never from the split kernel)
				for i := range o {
					o[i] /= sum
				}
			}
		}
	})
}

// BlockHeads is how many query heads of one KV head's group a split block
// serves: the largest divisor of the group whose heads, rounded up to a
// power of two (the kernel's lane layout), span at most MaxBlockHeadDims
// dims and are at most MaxBlockHeads, so the query and accumulator registers of a lane stay within
// budget. The real model's group of 8 heads of 256 dims is one block.
func BlockHeads(group, headDim int) int {
	best := 1
	for b := 1; b <= group; b++ {
		if group%b == 0 && b <= MaxBlockHeads && pow2Ceil(b)*headDim <= MaxBlockHeadDims {
			best = b
		}
	}
	return best
}

// MaxBlockHeads bounds block_heads: a lane holds a partial dot product
// per (head, position) of a warp step, at most one per lane of a warp.
const MaxBlockHeads = 32

// MaxBlockHeadDims bounds block_heads (rounded up to a power of two) ×
// head_dim: 64 query and 64 accumulator floats per lane of a 32-lane warp.
const MaxBlockHeadDims = 2048

// MaxSplits bounds the splits (the combine keeps a weight per split in
// shared memory).
const MaxSplits = 1024

// MaxSplitHeadDim bounds head_dim: the combine sums a head_dim row per warp
// in shared memory (32 KiB at 1024 with 8 warps, within sm_90's 48 KiB).
const MaxSplitHeadDim = 1024

func pow2Ceil(x int) int {
	p := 1
	for p < x {
		p *= 2
	}
	return p
}

// partialExtent is the partial records of rows × q_heads × splits.
func partialExtent(p ir.Params, rows int64) int64 {
	return rows * int64(p.Int("q_heads")) * int64(p.Int("splits")) * int64(PartialStride(p.Int("head_dim")))
}

func attentionDecodeSplit() *ir.Family {
	return splitFamily(ir.AttentionDecodeSplit, nil)
}

// attentionDecodeStream is attention_decode_split streamed through a
// shared-memory ring (attention_decode_stream.tmpl): the same operands,
// parameters, launch and reference, for the shapes whose ring step fits
// (DecodeStreamFits).
func attentionDecodeStream() *ir.Family {
	return splitFamily(ir.AttentionDecodeStream, DecodeStreamFits)
}

// StreamSharedBytes is the static shared memory attention_decode_stream
// allots itself on every target; the ring takes as many steps of it (up to
// four) as fit.
const StreamSharedBytes = 48 << 10

// streamGeometry mirrors the template's constants: positions per warp
// step, ring steps, and the shared bytes of one ring step of a block of
// threads and of the merge, for a kernel of params p.
func streamGeometry(p ir.Params, threads int) (ppw, stages, stepBytes, mergeBytes int) {
	const lanes = 32
	d := p.Int("head_dim")
	es := 4
	if p.Flag("kv_bf16") {
		es = 2
	}
	slice := d / lanes * es
	words := max(1, slice/4)
	hbp := pow2Ceil(p.Int("block_heads"))
	ppw = max(1, 32/slice)
	ppw = min(ppw, 32/hbp)
	for ppw&(ppw-1) != 0 {
		ppw &= ppw - 1
	}
	warps := threads / lanes
	stepBytes = ppw * 2 * words * lanes * 4 * warps
	stages = min(4, max(1, StreamSharedBytes/stepBytes))
	mergeBytes = (2*warps*hbp + max(1, warps/2)*hbp*d) * 4
	return ppw, stages, stepBytes, mergeBytes
}

// DecodeStreamFits holds the shapes attention_decode_stream serves: head_dim
// a multiple of a warp's 32 lanes, one ring step and the warps' merge within StreamSharedBytes, with the
// 256-thread blocks of the GPU targets.
func DecodeStreamFits(p ir.Params) error {
	if d := p.Int("head_dim"); d%32 != 0 {
		return fmt.Errorf("head_dim %d is not a multiple of the 32 lanes of a warp", d)
	}
	_, _, step, merge := streamGeometry(p, 256)
	if step > StreamSharedBytes || merge > StreamSharedBytes {
		return fmt.Errorf("a ring step of %d bytes or a merge of %d exceeds the %d bytes of shared memory (head_dim %d)",
			step, merge, StreamSharedBytes, p.Int("head_dim"))
	}
	return nil
}

// splitFamily declares the split pass's first kernel of kind k; fits, when
// set, is the kind's own limit on the shapes.
func splitFamily(k ir.Kind, fits func(ir.Params) error) *ir.Family {
	return &ir.Family{
		Kind: k,
		Operands: []ir.OperandSpec{
			{Name: "partial", DType: ir.F32, Access: ir.Write, Extent: partialExtent},
			{Name: "q", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "k_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
			{Name: "v_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
		},
		Params: cat(ir.Ints("q_heads", "kv_heads", "head_dim"), ir.Reals("scale"), ir.Ints("capacity", "width"),
			ir.Flags("kv_bf16"), ir.Ints("splits", "split_align", "block_heads")),
		AnyFloatFlag: "kv_bf16",
		Slots:        []ir.Slot{ir.ParamPos},
		Check: func(p ir.Params) error {
			if p.Int("q_heads")%p.Int("kv_heads") != 0 {
				return fmt.Errorf("q_heads %d is not a multiple of kv_heads %d", p.Int("q_heads"), p.Int("kv_heads"))
			}
			if err := checkPartial(p); err != nil {
				return err
			}
			if p.Int("width") != p.Int("kv_heads")*p.Int("head_dim") {
				return fmt.Errorf("width %d is not kv_heads × head_dim", p.Int("width"))
			}
			group, b := p.Int("q_heads")/p.Int("kv_heads"), p.Int("block_heads")
			if group%b != 0 || b > MaxBlockHeads || pow2Ceil(b)*p.Int("head_dim") > MaxBlockHeadDims {
				return fmt.Errorf("block_heads %d must divide the group of %d query heads, be at most %d and, rounded up to a power of two, span at most %d dims of %d",
					b, group, MaxBlockHeads, MaxBlockHeadDims, p.Int("head_dim"))
			}
			if fits != nil {
				return fits(p)
			}
			return nil
		},
		// One block per (split, KV head's block of query heads, row).
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			blocks := p.Int("q_heads") / p.Int("block_heads")
			return c.Blocks(p.Int("splits"), blocks, rows)
		},
		Reference: func(a *ir.Args) error {
			pos := int(a.Slot(ir.ParamPos))
			if pos < 0 || pos+a.N > a.Int("capacity") {
				return fmt.Errorf("attention past the KV cache: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
			}
			AttentionDecodeSplit(a.F32("partial"), a.F32("q"), cacheF32(a, "k_cache"), cacheF32(a, "v_cache"), a.N, pos,
				a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim"), a.Real32("scale"), a.Int("splits"), a.Int("split_align"))
			return nil
		},
		// fold: qk_norm_rope_append folded in (attention_decode_split_qk).
		TemplateData: func(ir.Params) map[string]any { return map[string]any{"fold": false} },
	}
}

// attentionCombineGate is attention_combine followed by attn_output_gate
// in one launch: out = combine(partial) ⊙ sigmoid(gate half of qg), per
// head. Its reference is the two references in turn.
func attentionCombineGate() *ir.Family {
	return &ir.Family{
		Kind: ir.AttentionCombineGate,
		Operands: []ir.OperandSpec{
			{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "partial", DType: ir.F32, Access: ir.Read, Extent: partialExtent},
			{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
				return rows * 2 * int64(p.Int("q_heads")*p.Int("head_dim"))
			}},
		},
		Params:   ir.Ints("q_heads", "head_dim", "splits"),
		Check:    checkPartial,
		Template: "attention_combine.tmpl",
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			return c.Blocks(p.Int("q_heads"), rows, 1)
		},
		Reference: func(a *ir.Args) error {
			out := a.F32("out")
			AttentionCombine(out, a.F32("partial"), a.N, a.Int("q_heads"), a.Int("head_dim"), a.Int("splits"))
			AttnOutputGate(out, a.F32("qg"), a.N, a.Int("q_heads"), a.Int("head_dim"))
			return nil
		},
		TemplateData: func(ir.Params) map[string]any { return map[string]any{"gate": true} },
	}
}

func attentionCombine() *ir.Family {
	return &ir.Family{
		Kind: ir.AttentionCombine,
		Operands: []ir.OperandSpec{
			{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "partial", DType: ir.F32, Access: ir.Read, Extent: partialExtent},
		},
		Params:       ir.Ints("q_heads", "head_dim", "splits"),
		Check:        checkPartial,
		TemplateData: func(ir.Params) map[string]any { return map[string]any{"gate": false} },
		// One block per (query head, row), as attention.
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			return c.Blocks(p.Int("q_heads"), rows, 1)
		},
		Reference: func(a *ir.Args) error {
			AttentionCombine(a.F32("out"), a.F32("partial"), a.N, a.Int("q_heads"), a.Int("head_dim"), a.Int("splits"))
			return nil
		},
	}
}

// checkPartial holds the partial records' parameters, which both
// families share.
func checkPartial(p ir.Params) error {
	if p.Int("splits") > MaxSplits {
		return fmt.Errorf("splits %d exceed %d", p.Int("splits"), MaxSplits)
	}
	if d := p.Int("head_dim"); d%4 != 0 || d > MaxSplitHeadDim {
		return fmt.Errorf("head_dim %d is not a multiple of 4 up to %d", d, MaxSplitHeadDim)
	}
	return nil
}
