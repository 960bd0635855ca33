package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// Flash attention for prefill (docs/prefill-attention.md). attention runs
// one block per (query head, row) on CUDA cores and reads the whole
// context once per query row and head; attention_prefill runs a tile of
// block_m packed (token, query head) rows of one KV head's group per block
// on tensor cores, streaming the context's K and V through shared memory in
// tiles of block_n positions with an online softmax, and applies the output
// gate before it stores. The planner makes it from the prefill step's
// attention + attn_output_gate pair on GPU targets; attention and
// attn_output_gate stay the oracle: the reference is theirs, composed.

// PrefillHeadDimMax bounds head_dim: a warp's f32 accumulator of 16 rows
// holds head_dim / 2 floats per lane (128 at 256).
const PrefillHeadDimMax = 256

// PrefillTileDim says whether a row of d bf16 (head_dim, or block_n for
// the P stage) suits mma.tmpl's swizzled tiles: its 16-byte chunks XORed
// with row % 8 (fewer below 8 chunks) stay within the row only when the
// chunks are a power of two up to 8 or a multiple of 8. So d is 16, 32, 64
// or a multiple of 64 (head_dim 80 or 96 scrambled the rows on the H200).
func PrefillTileDim(d int) bool {
	c := d / 8
	return d%16 == 0 && (c%8 == 0 || c == 2 || c == 4)
}

// PrefillSharedBytes is the dynamic shared memory of an attention_prefill
// block: the Q tile and one K and one V tile as bf16 (mma.tmpl's swizzled
// tiles, no padding; twice each with split_q, split_kv: the lo terms),
// then the P stage of the WMMA path (block_m × block_n bf16; sm_90 keeps p
// in registers and leaves it unused).
func PrefillSharedBytes(p ir.Params) int {
	d := p.Int("head_dim")
	bm, bn := p.Int("block_m"), p.Int("block_n")
	q, kv := 1, 1
	if p.Flag("split_q") {
		q = 2
	}
	if p.Flag("split_kv") {
		kv = 2
	}
	return ((q*bm+2*kv*bn)*d + bm*bn) * 2
}

// PrefillMMAs is the tensor-core products per (row, position, dim) pair
// (a plain bf16 kernel's: two): q·kᵀ takes 1 + split_q + split_kv, p·v
// 1 + split_kv + split_p.
func PrefillMMAs(p ir.Params) int {
	n := 2
	for _, f := range []string{"split_q", "split_kv", "split_kv", "split_p"} {
		if p.Flag(f) {
			n++
		}
	}
	return n
}

// PrefillFLOPs is the matrix work of one attention_prefill launch of n
// rows at position pos: q·kᵀ and p·v over every (row, head, visible
// position), 4·head_dim flops each.
func PrefillFLOPs(p ir.Params, n, pos int) int64 {
	var visible int64
	for t := range n {
		visible += int64(min(pos+t+1, p.Int("capacity")))
	}
	return visible * int64(p.Int("q_heads")) * 4 * int64(p.Int("head_dim"))
}

// prefillHeads checks what attention_prefill and attention_prefill_wg
// share: the heads, the cache's width and the precision flags' relation.
func prefillHeads(p ir.Params) error {
	if p.Int("q_heads")%p.Int("kv_heads") != 0 {
		return fmt.Errorf("q_heads %d is not a multiple of kv_heads %d", p.Int("q_heads"), p.Int("kv_heads"))
	}
	if p.Int("width") != p.Int("kv_heads")*p.Int("head_dim") {
		return fmt.Errorf("width %d is not kv_heads × head_dim", p.Int("width"))
	}
	if p.Flag("split_kv") && p.Flag("kv_bf16") {
		return fmt.Errorf("split_kv splits an f32 cache; this one is bf16")
	}
	return nil
}

func attentionPrefill() *ir.Family {
	return &ir.Family{
		Kind: ir.AttentionPrefill,
		Operands: []ir.OperandSpec{
			{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "q", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
				return rows * 2 * int64(p.Int("q_heads")*p.Int("head_dim"))
			}},
			{Name: "k_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
			{Name: "v_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
		},
		Params: cat(ir.Ints("q_heads", "kv_heads", "head_dim"), ir.Reals("scale"), ir.Ints("capacity", "width"),
			ir.Flags("kv_bf16"), ir.Ints("block_m", "block_n"), ir.Flags("split_q", "split_kv", "split_p"), ir.OptionalFlags("flush_k")),
		AnyFloatFlag: "kv_bf16",
		Slots:        []ir.Slot{ir.ParamPos},
		Check: func(p ir.Params) error {
			if err := prefillHeads(p); err != nil {
				return err
			}
			if d := p.Int("head_dim"); !PrefillTileDim(d) || d > PrefillHeadDimMax {
				return fmt.Errorf("head_dim %d is not 16, 32, 64 or a multiple of 64 up to %d (the swizzled tensor-core tiles)", d, PrefillHeadDimMax)
			}
			if bm, bn := p.Int("block_m"), p.Int("block_n"); bm < 16 || bm%16 != 0 || !PrefillTileDim(bn) {
				return fmt.Errorf("block_m %d must be a positive multiple of 16, block_n %d 16, 32, 64 or a multiple of 64", bm, bn)
			}
			return nil
		},
		// One block per tile of block_m packed rows and KV head: a warp per
		// 16 rows, the tiles in dynamic shared memory.
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			group := p.Int("q_heads") / p.Int("kv_heads")
			s := c.Blocks(ir.Ceil(rows*group, p.Int("block_m")), p.Int("kv_heads"), 1)
			s.Block[0] = p.Int("block_m") / 16 * c.Warp
			s.SharedBytes = PrefillSharedBytes(p)
			return s
		},
		Reference: func(a *ir.Args) error {
			pos := int(a.Slot(ir.ParamPos))
			if pos < 0 || pos+a.N > a.Int("capacity") {
				return fmt.Errorf("attention past the KV cache: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
			}
			Attention(a.F32("out"), a.F32("q"), cacheF32(a, "k_cache"), cacheF32(a, "v_cache"), a.N, pos, a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim"), a.Real32("scale"))
			AttnOutputGate(a.F32("out"), a.F32("qg"), a.N, a.Int("q_heads"), a.Int("head_dim"))
			return nil
		},
	}
}
