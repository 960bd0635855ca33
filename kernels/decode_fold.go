package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
)

// qk_norm_rope_append folded into the decode attention's split
// (docs/decode-attention.md): attention_decode_split_qk and
// attention_decode_mma_qk are attention_decode_split and
// attention_decode_mma (the same templates with fold set) that take the
// projection's outputs instead of a rotated q and a filled cache. Every
// block norms and rotates the q of its query heads from qg itself; the
// cache positions from pos on are this launch's new rows, which no block
// reads from the cache: the block whose split holds one norms and rotates
// that key from k, takes its value from v, rounds both to the cache's
// dtype and uses them, and the first block of the KV head, in the row whose
// position it is, stores them in the cache for the later steps. One launch
// a layer fewer than qk_norm_rope_append followed by the split.

// foldFamily is split family base with qk_norm_rope_append folded in, as
// kind: its operands, the norm and RoPE parameters, the reference composed
// of both references, the template's fold flag and RoPE frequencies.
func foldFamily(base *ir.Family, kind ir.Kind) *ir.Family {
	f := *base
	f.Kind = kind
	f.Template = string(base.Kind) + ".tmpl"
	cache := func(name string) ir.OperandSpec {
		return ir.OperandSpec{Name: name, DType: ir.AnyFloat, Access: ir.ReadWrite, Extent: ir.Fixed("capacity", "width")}
	}
	f.Operands = []ir.OperandSpec{
		base.Operands[0], // partial
		{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
			return rows * 2 * int64(p.Int("q_heads")*p.Int("head_dim"))
		}},
		cache("k_cache"), cache("v_cache"),
		{Name: "k", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
		{Name: "v", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
		{Name: "q_norm", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("head_dim")},
		{Name: "k_norm", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("head_dim")},
	}
	f.Params = cat(base.Params, ir.Ints("rot_dim", "new_rows"), ir.Reals("eps", "theta"), ir.Flags("one_plus"))
	check := base.Check
	f.Check = func(p ir.Params) error {
		if err := check(p); err != nil {
			return err
		}
		if r := p.Int("rot_dim"); r > p.Int("head_dim") || r%2 != 0 {
			return fmt.Errorf("rot_dim %d must be even and at most head_dim %d", r, p.Int("head_dim"))
		}
		if b := FoldRowBytes(p); p.Int("new_rows") < 1 || b > MaxFoldRowBytes {
			return fmt.Errorf("new_rows %d: want at least 1, their K and V rows (%d bytes) within %d", p.Int("new_rows"), b, MaxFoldRowBytes)
		}
		return nil
	}
	f.Reference = foldReference
	data := base.TemplateData
	f.TemplateData = func(p ir.Params) map[string]any {
		m := data(p)
		m["fold"] = true
		m["inv_freq"] = ropeInvFreq(p.Int("rot_dim"), p.Real("theta"))
		return m
	}
	return &f
}

// foldReference is qk_norm_rope_append's reference, then the split's: q
// normed and rotated into a scratch row, k and v appended to the caches
// (rounded to bf16 where the cache is bf16, as the attention then reads
// them), then the partial records over the caches.
func foldReference(a *ir.Args) error {
	pos := int(a.Slot(ir.ParamPos))
	if pos < 0 || pos+a.N > a.Int("capacity") {
		return fmt.Errorf("KV cache full: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
	}
	if a.N > a.Int("new_rows") {
		return fmt.Errorf("%d rows: the fold keeps at most new_rows = %d new rows", a.N, a.Int("new_rows"))
	}
	if a.N <= 0 {
		return nil
	}
	hq, hkv, d := a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim")
	kc, vc := cacheF32(a, "k_cache"), cacheF32(a, "v_cache")
	q := make([]float32, a.N*hq*d)
	QKNormRoPEAppend(q, kc, vc, a.F32("qg"), a.F32("k"), a.F32("v"), a.F32("q_norm"), a.F32("k_norm"), a.N, pos,
		hq, hkv, d, a.Int("rot_dim"), a.Real32("eps"), a.Flag("one_plus"), a.Real("theta"))
	if a.Flag("kv_bf16") {
		kb, vb := a.BF16("k_cache"), a.BF16("v_cache")
		for i := pos * a.Int("width"); i < (pos+a.N)*a.Int("width"); i++ {
			kb[i], vb[i] = bf16.FromFloat32(kc[i]), bf16.FromFloat32(vc[i])
			kc[i], vc[i] = bf16.ToFloat32(kb[i]), bf16.ToFloat32(vb[i])
		}
	}
	AttentionDecodeSplit(a.F32("partial"), q, kc, vc, a.N, pos, hq, hkv, d, a.Real32("scale"), a.Int("splits"), a.Int("split_align"))
	return nil
}

// FoldRowBytes is the shared memory the launch's new K and V rows take
// in a folded kernel ([new_rows][K, V][head_dim] in the cache's dtype):
// normed before the split's loop, read from there instead of the cache.
func FoldRowBytes(p ir.Params) int {
	es := 4
	if p.Flag("kv_bf16") {
		es = 2
	}
	return p.Int("new_rows") * 2 * p.Int("head_dim") * es
}

// MaxFoldRowBytes bounds FoldRowBytes: 16 rows of the real model's bf16
// heads (a decode step appends one).
const MaxFoldRowBytes = 16 << 10

// DecodeMMAFoldBytes is the dynamic shared memory of an
// attention_decode_mma_qk block: attention_decode_mma's, then the new rows.
func DecodeMMAFoldBytes(p ir.Params) int { return DecodeMMASharedBytes(p) + FoldRowBytes(p) }

func attentionDecodeSplitQK() *ir.Family {
	return foldFamily(attentionDecodeSplit(), ir.AttentionDecodeSplitQK)
}

func attentionDecodeMMAQK() *ir.Family {
	f := foldFamily(attentionDecodeMMA(), ir.AttentionDecodeMMAQK)
	launch := f.Launch
	f.Launch = func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
		s := launch(p, rows, c)
		s.SharedBytes = DecodeMMAFoldBytes(p)
		return s
	}
	return f
}
