package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// QKNormRoPEAppend is the attention layer's steps between the projections
// and the attention (SPEC §2.3 steps 2–4) for rows t < n at positions
// pos0+t, composed from the references it replaces: q[t][h] =
// RoPE(RMSNorm(qg[t][h·2d : h·2d+d], qNorm)) for every query head, the key
// heads RoPE(RMSNorm(k[t][g], kNorm)) and the value rows v[t] appended to
// the caches at pos0+t. k itself is left as it was (the fused kernel never
// writes it back).
func QKNormRoPEAppend(q, kCache, vCache, qg, k, v, qNorm, kNorm []float32, n, pos0, hq, hkv, d, rot int, eps float32, onePlus bool, theta float64) {
	if n <= 0 {
		return
	}
	RMSNorm(q, d, qg, 2*d, qNorm, n*hq, d, eps, onePlus)
	kn := make([]float32, n*hkv*d)
	RMSNorm(kn, d, k, d, kNorm, n*hkv, d, eps, onePlus)
	RoPE(q, hq*d, n, hq, d, rot, pos0, theta)
	RoPE(kn, hkv*d, n, hkv, d, rot, pos0, theta)
	KVAppend(kCache, vCache, kn, v, n, pos0, hkv*d)
}

// qkNormRoPEAppend fuses rmsnorm (q heads) + rmsnorm (k heads) + rope (q)
// + rope (k) + kv_append: one block per (head, row) instead of five
// launches, q and k normalized and rotated in shared memory, k and v
// written to the cache as it stores them.
func qkNormRoPEAppend() *ir.Family {
	return &ir.Family{
		Kind: ir.QKNormRoPEAppend,
		Operands: []ir.OperandSpec{
			{Name: "q", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
			{Name: "k_cache", DType: ir.AnyFloat, Access: ir.ReadWrite, Extent: ir.Fixed("capacity", "width")},
			{Name: "v_cache", DType: ir.AnyFloat, Access: ir.ReadWrite, Extent: ir.Fixed("capacity", "width")},
			{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
				return rows * 2 * int64(p.Int("q_heads")*p.Int("head_dim"))
			}},
			{Name: "k", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
			{Name: "v", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
			{Name: "q_norm", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("head_dim")},
			{Name: "k_norm", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("head_dim")},
		},
		Params: cat(ir.Ints("q_heads", "kv_heads", "head_dim", "rot_dim", "capacity", "width"),
			ir.Reals("eps", "theta"), ir.Flags("one_plus", "kv_bf16")),
		AnyFloatFlag: "kv_bf16",
		Slots:        []ir.Slot{ir.ParamPos},
		Check: func(p ir.Params) error {
			if p.Int("rot_dim") > p.Int("head_dim") || p.Int("rot_dim")%2 != 0 {
				return fmt.Errorf("rot_dim %d must be even and at most head_dim %d", p.Int("rot_dim"), p.Int("head_dim"))
			}
			if p.Int("width") != p.Int("kv_heads")*p.Int("head_dim") {
				return fmt.Errorf("width %d is not kv_heads × head_dim", p.Int("width"))
			}
			if p.Int("head_dim") > MaxQKNormHeadDim {
				return fmt.Errorf("head_dim %d exceeds %d (the kernel holds a head in shared memory)", p.Int("head_dim"), MaxQKNormHeadDim)
			}
			return nil
		},
		// One block per (head, row): the query heads, then the key heads
		// (each with its value row).
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			return c.Blocks(p.Int("q_heads")+p.Int("kv_heads"), rows, 1)
		},
		Reference: func(a *ir.Args) error {
			pos := int(a.Slot(ir.ParamPos))
			if pos < 0 || pos+a.N > a.Int("capacity") {
				return fmt.Errorf("KV cache full: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
			}
			QKNormRoPEAppend(a.F32("q"), a.F32("k_cache"), a.F32("v_cache"), a.F32("qg"), a.F32("k"), a.F32("v"),
				a.F32("q_norm"), a.F32("k_norm"), a.N, pos, a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim"),
				a.Int("rot_dim"), a.Real32("eps"), a.Flag("one_plus"), a.Real("theta"))
			return nil
		},
		TemplateData: func(p ir.Params) map[string]any {
			return map[string]any{"inv_freq": ropeInvFreq(p.Int("rot_dim"), p.Real("theta"))}
		},
	}
}

// MaxQKNormHeadDim bounds head_dim for qk_norm_rope_append: a head's
// normalized row and its cos and sin live in shared memory.
const MaxQKNormHeadDim = 4096
