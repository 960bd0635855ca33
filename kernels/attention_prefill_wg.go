package kernels

import (
	"fmt"
	"strings"

	"github.com/aimaproject/aimac/ir"
)

// attention_prefill_wg is attention_prefill on sm_90a's warpgroup matrix
// instructions (docs/prefill-attention.md, "wgmma"): the same operands,
// parameters, precision flags and reference, a different kernel. A warpgroup
// of 4 warps owns 64 packed rows; q·kᵀ is wgmma with Q and K from shared
// memory, p·v wgmma with p from the score registers and V from shared
// memory (N-major), the S of the next K/V tile issued beside the p·v of
// this one so that the softmax runs while the tensor cores work. The tiles
// are wgmma's 128-byte swizzled layout (WGTileOffset), filled by cp.async;
// one or two K and V buffers each (WGStages). A bf16 cache only (its rows copy
// straight into the tiles); head_dim a multiple of 64 (the swizzle's row
// of 128 bytes), block_m 64 or 128 (one or two warpgroups), block_n a
// multiple of 16 up to 256. Other shapes keep attention_prefill.

// WGStages are the K and V buffers of an attention_prefill_wg block: two
// V buffers when they fit beside Q (and its lo terms) and one K buffer, so
// that V(j+1) is copied while p·V(j) runs, then two K buffers when those
// fit too, so that K(j+2) is copied without waiting for every warpgroup to
// finish q·K(j+1)ᵀ (one barrier a tile instead of two); one of each
// otherwise.
func WGStages(p ir.Params, maxShared int) (k, v int) {
	switch {
	case wgSharedBytes(p, 2, 2) <= maxShared:
		return 2, 2
	case wgSharedBytes(p, 1, 2) <= maxShared:
		return 1, 2
	}
	return 1, 1
}

// wgAlign is the slack for rounding the dynamic shared memory up to the
// 1024 bytes that the 128-byte swizzle pattern repeats over (the hardware
// swizzles by address bits, so each 8-row atom must start on 1024).
const wgAlign = 1024

func wgSharedBytes(p ir.Params, kStages, vStages int) int {
	d := p.Int("head_dim")
	bm, bn := p.Int("block_m"), p.Int("block_n")
	q := 1
	if p.Flag("split_q") {
		q = 2
	}
	return (q*bm+(kStages+vStages)*bn)*d*2 + wgAlign
}

// WGSharedMax is the shared memory a wgmma descriptor can address: 14 bits
// of 16-byte units.
const WGSharedMax = 1 << 18

// WGSharedBytes is the dynamic shared memory of an attention_prefill_wg
// block with the family's k_stages and v_stages.
func WGSharedBytes(p ir.Params) int { return wgSharedBytes(p, p.Int("k_stages"), p.Int("v_stages")) }

// WGTileOffset is the bf16 element offset of (row, col) in a wgmma tile of
// rows × cols (cols a multiple of 64): cols/64 column blocks of rows × 128
// bytes, the 16-byte chunk c of a row stored at c ^ (row % 8) (what wgmma's
// 128-byte swizzle reads, from a 1024-byte aligned base). The kernel's
// wg_at is the same function; the test checks this one.
func WGTileOffset(rows, row, col int) int {
	chunk := col / 8
	return ((chunk/8)*rows+row)*64 + ((chunk%8)^(row%8))*8 + col%8
}

// WGShape says whether a head_dim and tile suit attention_prefill_wg.
func WGShape(d, bm, bn int) error {
	switch {
	case d%64 != 0 || d < 64 || d > PrefillHeadDimMax:
		return fmt.Errorf("head_dim %d is not a multiple of 64 up to %d (the 128-byte swizzled rows of wgmma's tiles)", d, PrefillHeadDimMax)
	case bm != 64 && bm != 128:
		return fmt.Errorf("block_m %d is not 64 or 128 (one or two warpgroups of 64 rows)", bm)
	case bn%16 != 0 || bn < 16 || bn > 256:
		return fmt.Errorf("block_n %d is not a multiple of 16 up to 256 (wgmma's n and p·v's k steps)", bn)
	}
	return nil
}

func attentionPrefillWG() *ir.Family {
	f := attentionPrefill()
	f.Kind = ir.AttentionPrefillWG
	f.CUDAOnly = true
	f.Params = append(append(f.Params, ir.Ints("k_stages", "v_stages")...), ir.Flags("fp16")...)
	f.Check = func(p ir.Params) error {
		if err := prefillHeads(p); err != nil {
			return err
		}
		if !p.Flag("kv_bf16") {
			return fmt.Errorf("attention_prefill_wg copies a bf16 cache's rows into its tiles; this cache is f32")
		}
		if err := WGShape(p.Int("head_dim"), p.Int("block_m"), p.Int("block_n")); err != nil {
			return err
		}
		for _, n := range []string{"k_stages", "v_stages"} {
			if s := p.Int(n); s != 1 && s != 2 {
				return fmt.Errorf("%s %d is not 1 or 2", n, s)
			}
		}
		if p.Flag("fp16") && (p.Flag("split_q") || p.Flag("split_p")) {
			return fmt.Errorf("fp16 takes q and p as one fp16 term each; split_q and split_p must be off")
		}
		if b := WGSharedBytes(p); b > WGSharedMax {
			return fmt.Errorf("%d bytes of shared memory: the matrix descriptors address %d", b, WGSharedMax)
		}
		if c := p.Int("capacity"); int64(c)+2*int64(p.Int("block_n")) >= 1<<31 {
			return fmt.Errorf("capacity %d: the kernel's positions (up to two tiles past it) are 32-bit", c)
		}
		return nil
	}
	f.Launch = func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
		group := p.Int("q_heads") / p.Int("kv_heads")
		s := c.Blocks(ir.Ceil(rows*group, p.Int("block_m")), p.Int("kv_heads"), 1)
		s.Block[0] = p.Int("block_m") / 16 * c.Warp
		s.SharedBytes = WGSharedBytes(p)
		return s
	}
	f.TemplateData = func(p ir.Params) map[string]any {
		return map[string]any{
			"wg_mma_s":   wgmmaFunc("wg_mma_s", p.Int("block_n"), false, p.Flag("fp16")),
			"wg_mma_o":   wgmmaFunc("wg_mma_o", p.Int("head_dim"), true, p.Flag("fp16")),
			"wg_fence_s": wgFenceFunc("wg_fence_s", p.Int("block_n")),
			"wg_fence_o": wgFenceFunc("wg_fence_o", p.Int("head_dim")),
		}
	}
	return f
}

// wgmmaFunc is the CUDA source of one wgmma m64nNk16 bf16 → f32 product
// into N/16 accumulator atoms (mma_c, 8 floats: the m64nN accumulator of a
// warp's 16 rows is the mma.sync m16n8 layout per 8 columns): A and B from
// shared memory descriptors, both K-major, or (aRegs) A from a warp's mma_a
// fragment and B N-major (transposed: a [k][n] tile, attention's V). acc 0
// overwrites the accumulator. Generated here because the operand list is
// N/2 registers long.
func wgmmaFunc(name string, n int, aRegs, fp16 bool) string {
	ab := "bf16"
	if fp16 {
		ab = "f16"
	}
	f := n / 2
	var d, cons []string
	for i := range f {
		d = append(d, fmt.Sprintf("%%%d", i))
		cons = append(cons, fmt.Sprintf(`"+f"(d[%d].v[%d])`, i/8, i%8))
	}
	var b strings.Builder
	a := "unsigned long long da"
	if aRegs {
		a = "const mma_a& a"
	}
	fmt.Fprintf(&b, "DEVICE void %s(mma_c (&d)[%d], %s, unsigned long long db, int acc) {\n", name, n/16, a)
	b.WriteString("  WG_ASM(\"{\\n.reg .pred p;\\n\"\n")
	if aRegs {
		fmt.Fprintf(&b, "      \"setp.ne.b32 p, %%%d, 0;\\n\"\n", f+5)
		fmt.Fprintf(&b, "      \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, 1;\\n}\\n\"\n",
			n, ab, ab, strings.Join(d, ", "), f, f+1, f+2, f+3, f+4)
		fmt.Fprintf(&b, "      : %s\n      : \"r\"(a.r[0]), \"r\"(a.r[1]), \"r\"(a.r[2]), \"r\"(a.r[3]), \"l\"(db), \"r\"(acc));\n}\n", strings.Join(cons, ", "))
	} else {
		fmt.Fprintf(&b, "      \"setp.ne.b32 p, %%%d, 0;\\n\"\n", f+2)
		fmt.Fprintf(&b, "      \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {%s}, %%%d, %%%d, p, 1, 1, 0, 0;\\n}\\n\"\n",
			n, ab, ab, strings.Join(d, ", "), f, f+1)
		fmt.Fprintf(&b, "      : %s\n      : \"l\"(da), \"l\"(db), \"r\"(acc));\n}\n", strings.Join(cons, ", "))
	}
	return b.String()
}

// wgFenceFunc is an empty volatile asm that reads and writes the N/16
// accumulator atoms: placed after wgmma.wait_group (and before an issue), it
// keeps the compiler from moving their uses across the wait, since the
// asynchronous product writes them behind its back.
func wgFenceFunc(name string, n int) string {
	var cons []string
	for i := range n / 2 {
		cons = append(cons, fmt.Sprintf(`"+f"(d[%d].v[%d])`, i/8, i%8))
	}
	return fmt.Sprintf("DEVICE void %s(mma_c (&d)[%d]) {\n  asm volatile(\"\" : %s :: \"memory\");\n}\n", name, n/16, strings.Join(cons, ", "))
}
