package codegen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/plans"
)

// The tolerances of attention_prefill against attention ∘ attn_output_gate.
// An operand the kernel takes as one bf16 term (q without split_q, k and v
// without split_kv) is a bf16 value already in the cases; split ones are
// arbitrary f32 values, carried to ≈ 2⁻¹⁷ relative by their two terms.
// With q, k, v and p all carried so (the planner's sm_90 precision) the
// runner's f32 tolerance holds: a score moves by ≤ 2⁻¹⁶·Σ|q·k|·scale ≈ 6e-5
// here, a weight by 2⁻¹⁷ of itself. With p as one bf16 term (plain, and
// gfx1151) each weight is within 2⁻⁹ of itself, so |Δo| ≤ 2⁻⁹·max|v| ≈ 2e-3
// for |v| ≤ 1 (the gate only shrinks it): prefillATol, plus f32 sums in
// another order and ex2.approx (≈ 2 ulp).
const (
	prefillATol = 2.5e-3
	prefillRTol = 1e-3
)

// prefillKernel is an attention_prefill kernel with a tile of block_m
// packed rows and block_n positions, q and p split into two bf16 terms or
// not, an f32 cache's k and v too (splitKV, ignored with a bf16 cache).
func prefillKernel(hq, hkv, d, capacity, bm, bn int, bf16KV, splitQP, splitKV bool) plan.Kernel {
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	return kern("attention_prefill", map[string]float64{"q_heads": float64(hq), "kv_heads": float64(hkv),
		"head_dim": float64(d), "scale": 1 / math.Sqrt(float64(d)), "capacity": float64(capacity), "width": float64(hkv * d),
		"kv_bf16": b(bf16KV), "block_m": float64(bm), "block_n": float64(bn), "split_q": b(splitQP), "split_p": b(splitQP), "split_kv": b(splitKV && !bf16KV)})
}

// prefillFlush is attention_prefill kernel k with flush_k: each K/V tile's
// p·v summed from zero and added to the rescaled accumulator rounded to
// nearest.
func prefillFlush(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("flush_k", true)
	return k
}

// prefillCases are the correctness cases, with the planner's precision
// (q and p split into two bf16 terms; an f32 cache's k and v too) and tiles
// unless named plain:
// the real model's heads (16 query, 2 KV, 256 dims) at T = 1, 63, 64, 65
// and 1000 from position 0 (a tile of 128 rows is 16 tokens × 8 heads: 63
// tokens end mid-tile), 65, 1 and 100 rows after cached earlier-segment
// rows, a segment ending at the cache's last position, several tiles (200
// rows), plain bf16 operands; f32 and bf16 KV; the tiny fixtures' heads
// (4, 2, 32) at odd lengths with and without a cached prefix; a group of 3
// (tiles cut mid-token), one KV head per query head of 128 dims, head_dim
// 192 (24 chunks a row: the swizzle stays within it; 12 accumulator atoms,
// p·v's batches of 4 or 2), the 64-position tile of a split bf16 cache at
// head_dim 256 (its registers spill: no plan takes it); and gfx1151's tile and precision (64 × 16, plain bf16 operands:
// flash-bf16) on the same code paths.
func prefillCases() []gpuCase {
	var cs []gpuCase
	for _, bf := range []bool{false, true} {
		sfx := map[bool]string{false: "", true: "_bf16"}[bf]
		bn := map[bool]int{false: 32, true: 64}[bf] // smaller heads' tiles (the planner's for bf16 KV)
		// The planner's sm_90 tile at head_dim 256: 32 positions with either
		// cache (an f32 cache's shared memory, a bf16 cache's registers).
		real := func(capacity int) plan.Kernel { return prefillKernel(16, 2, 256, capacity, 128, 32, bf, true, true) }
		split := func(hq, hkv, d, capacity int) plan.Kernel {
			return prefillKernel(hq, hkv, d, capacity, 128, bn, bf, true, true)
		}
		cs = append(cs,
			gpuCase{"pf_t1" + sfx, real(80), 1, 0},
			gpuCase{"pf_t63" + sfx, real(80), 63, 0},
			gpuCase{"pf_t64" + sfx, real(80), 64, 0},
			gpuCase{"pf_t65" + sfx, real(80), 65, 0},
			gpuCase{"pf_cached65" + sfx, real(300), 65, 100},
			gpuCase{"pf_cached1" + sfx, real(300), 1, 219},
			gpuCase{"pf_full" + sfx, real(300), 37, 263},
			gpuCase{"pf_t200" + sfx, real(260), 200, 3},
			gpuCase{"pf_plain" + sfx, prefillKernel(16, 2, 256, 300, 128, 64, bf, false, false), 65, 100},
			gpuCase{"pf_tiny7" + sfx, split(4, 2, 32, 64), 7, 0},
			gpuCase{"pf_tiny_cached" + sfx, split(4, 2, 32, 128), 33, 19},
			gpuCase{"pf_tiny_tiles" + sfx, split(4, 2, 32, 200), 131, 5},
			gpuCase{"pf_group3" + sfx, split(6, 2, 64, 120), 43, 10},
			gpuCase{"pf_mha" + sfx, split(2, 2, 128, 90), 70, 17},
			gpuCase{"pf_hd192" + sfx, split(4, 2, 192, 100), 37, 11},
			gpuCase{"pf_hd192_plain" + sfx, prefillKernel(4, 2, 192, 100, 128, bn, bf, false, false), 29, 40},
			gpuCase{"pf_gfxtile" + sfx, prefillKernel(16, 2, 256, 300, 64, 16, bf, false, false), 65, 100},
			gpuCase{"pf_gfxtile_tiny" + sfx, prefillKernel(4, 2, 32, 64, 64, 16, bf, false, false), 9, 40},
			// flush_k on the same shapes: one row, a partial tile, a cached
			// prefix, several tiles, plain operands, the tiny fixtures' heads,
			// a group of three, head_dim 192 (12 accumulator atoms), gfx1151's
			// tile and precision (on sm_90: the WMMA path takes no flush_k).
			gpuCase{"pf_fk_t1" + sfx, prefillFlush(real(80)), 1, 0},
			gpuCase{"pf_fk_t65" + sfx, prefillFlush(real(80)), 65, 0},
			gpuCase{"pf_fk_cached65" + sfx, prefillFlush(real(300)), 65, 100},
			gpuCase{"pf_fk_t200" + sfx, prefillFlush(real(260)), 200, 3},
			gpuCase{"pf_fk_plain" + sfx, prefillFlush(prefillKernel(16, 2, 256, 300, 128, 64, bf, false, false)), 65, 100},
			gpuCase{"pf_fk_tiny_tiles" + sfx, prefillFlush(split(4, 2, 32, 200)), 131, 5},
			gpuCase{"pf_fk_group3" + sfx, prefillFlush(split(6, 2, 64, 120)), 43, 10},
			gpuCase{"pf_fk_hd192" + sfx, prefillFlush(split(4, 2, 192, 100)), 37, 11},
			gpuCase{"pf_fk_gfxtile" + sfx, prefillFlush(prefillKernel(16, 2, 256, 300, 64, 16, bf, false, false)), 65, 100},
			gpuCase{"pf_fk_gfxtile_tiny" + sfx, prefillFlush(prefillKernel(4, 2, 32, 64, 64, 16, bf, false, false)), 9, 40},
		)
		if bf { // the default GPU plans' cache only
			cs = append(cs,
				gpuCase{"pf_t1000" + sfx, real(1024), 1000, 0},
				gpuCase{"pf_cached100" + sfx, real(3200), 100, 3000},
				gpuCase{"pf_cached65_n64" + sfx, prefillKernel(16, 2, 256, 300, 128, 64, bf, true, false), 65, 100},
				gpuCase{"pf_fk_t1000" + sfx, prefillFlush(real(1024)), 1000, 0},
			)
		}
	}
	return cs
}

// prefillSpeed is one speed case at the real model's heads: a causal
// prefill of n rows from position pos (the cached context of earlier
// segments before it) with a tile of bm × bn, q and p split or not; a case
// with from set reads that case's files (a variant timed on the same bytes).
type prefillSpeed struct {
	name   string
	n, pos int
	bf16   bool
	split  bool
	reps   int
	bm, bn int
	from   string
	wg     bool // attention_prefill_wg (bf16 KV, the planner's V stages)
	fp16   bool // attention_prefill_wg with fp16 operands
	stages int  // attention_prefill_wg's K and V buffers: 0 the planner's, 1 one each
	flush  bool // attention_prefill with flush_k
}

// prefillCheckTokens is how many of a long-context speed case's tokens
// its reference covers (the runner compares a shorter want over its own
// length): 8K rows after 24K cached positions are ≈ 2 TFLOP of CPU work,
// its first 16 tokens 3 GFLOP (after 120K: 16 GFLOP).
const prefillCheckTokens = 16

// TestWriteGPUCasesPrefillAttention writes the correctness cases and the
// speed cases (an 8K prompt's q, gate and out rows are 512 MB: without
// -gpucases they are written to the temporary directory at a sixteenth of
// the rows): 1K and 8K with the planner's sm_90 tiles and precision (bf16
// KV: q and p split, 128 × 32; f32 KV: all four), every kernel at the
// plans' capacity of 256K positions, beside them on the same bytes plain
// bf16 operands (what the split costs) and the 64-position tile (`_n64`:
// faster, but it spills), and an 8K segment after 24K
// cached positions (the last bucket of a 32K prompt: the K/V caches
// written as one period of 512 positions and tiled on the device, the
// first 16 tokens checked, plain beside it) and after 120K (a 128K
// prompt's last bucket). A speed case's flops are kernels.PrefillFLOPs
// (q·kᵀ and p·v over the visible positions: 0.55 TFLOP per layer at 8K,
// 3.9 for the 32K bucket, whatever the split), its bytes what one launch
// must move: q, the gate half of qg, out and the K/V of the context once
// per KV head.
func TestWriteGPUCasesPrefillAttention(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range prefillCases() {
		writeCase(t, filepath.Join(out, c.name), c, uint64(3000+i))
	}
	for i, c := range wgCases() {
		writeCase(t, filepath.Join(out, c.name), c, uint64(3500+i))
	}
	scale := 1
	if *gpuCases == "" {
		scale = 16 // the same cases at a sixteenth of the rows, so the writer runs in every test run
	}
	// The last bucket of a 128K prompt: 9 tokens (72 packed rows, a partial
	// tile) ending at the cache's last position, 2048 K/V tiles a block (the
	// caches one period of 512 positions, tiled on the device).
	long := 131072 / scale
	writeCaseTiled(t, filepath.Join(out, "pf_cached128k_bf16"),
		gpuCase{"pf_cached128k_bf16", prefillKernel(16, 2, 256, long, 128, 64, true, true, true), 9, long - 9}, 3900, 512)
	const hq, hkv, d = 16, 2, 256
	speeds := []prefillSpeed{
		{"pf_speed_1k_bf16", 1024, 0, true, true, 50, 128, 32, "", false, false, 0, false},
		{"pf_speed_1k_bf16_plain", 1024, 0, true, false, 50, 128, 64, "pf_speed_1k_bf16", false, false, 0, false},
		{"pf_speed_1k_f32", 1024, 0, false, true, 50, 128, 32, "", false, false, 0, false},
		{"pf_speed_8k_bf16", 8192, 0, true, true, 5, 128, 32, "", false, false, 0, false},
		{"pf_speed_8k_bf16_n64", 8192, 0, true, true, 5, 128, 64, "pf_speed_8k_bf16", false, false, 0, false},
		{"pf_speed_8k_bf16_plain", 8192, 0, true, false, 5, 128, 64, "pf_speed_8k_bf16", false, false, 0, false},
		{"pf_speed_32k_bucket_bf16", 8192, 24576, true, true, 2, 128, 32, "", false, false, 0, false},
		{"pf_speed_32k_bucket_bf16_plain", 8192, 24576, true, false, 2, 128, 64, "pf_speed_32k_bucket_bf16", false, false, 0, false},
		{"pf_speed_128k_bucket_bf16", 8192, 122880, true, true, 1, 128, 32, "", false, false, 0, false},
		// attention_prefill_wg on the same bytes (the planner's tile: 128 × 64).
		{"pf_speed_1k_bf16_wg", 1024, 0, true, true, 50, 128, 64, "pf_speed_1k_bf16", true, false, 0, false},
		{"pf_speed_8k_bf16_wg", 8192, 0, true, true, 5, 128, 64, "pf_speed_8k_bf16", true, false, 0, false},
		{"pf_speed_8k_bf16_wg_plain", 8192, 0, true, false, 5, 128, 64, "pf_speed_8k_bf16", true, false, 0, false},
		{"pf_speed_8k_bf16_wg_n32", 8192, 0, true, true, 5, 128, 32, "pf_speed_8k_bf16", true, false, 0, false},
		{"pf_speed_8k_bf16_wg_m64", 8192, 0, true, true, 5, 64, 64, "pf_speed_8k_bf16", true, false, 0, false},
		{"pf_speed_32k_bucket_bf16_wg", 8192, 24576, true, true, 2, 128, 64, "pf_speed_32k_bucket_bf16", true, false, 0, false},
		{"pf_speed_128k_bucket_bf16_wg", 8192, 122880, true, true, 1, 128, 64, "pf_speed_128k_bucket_bf16", true, false, 0, false},
		// and with q, k, v and p as fp16 (a product each)
		{"pf_speed_8k_bf16_wg_fp16", 8192, 0, true, false, 5, 128, 64, "pf_speed_8k_bf16", true, true, 0, false},
		{"pf_speed_32k_bucket_bf16_wg_fp16", 8192, 24576, true, false, 2, 128, 64, "pf_speed_32k_bucket_bf16", true, true, 0, false},
		{"pf_speed_128k_bucket_bf16_wg_fp16", 8192, 122880, true, false, 1, 128, 64, "pf_speed_128k_bucket_bf16", true, true, 0, false},
		// one warpgroup a block and one K and V buffer: 97 KiB, two blocks an SM
		// (their barriers independent) for twice the K/V reads
		{"pf_speed_8k_bf16_wg_fp16_m64", 8192, 0, true, false, 5, 64, 64, "pf_speed_8k_bf16", true, true, 1, false},
		// wider K/V tiles for the single-term operands: fewer tiles a block,
		// wider q·kᵀ products (80 and 96 positions: one K buffer; 128: one of each)
		{"pf_speed_8k_bf16_wg_fp16_n80", 8192, 0, true, false, 5, 128, 80, "pf_speed_8k_bf16", true, true, 0, false},
		{"pf_speed_8k_bf16_wg_fp16_n96", 8192, 0, true, false, 5, 128, 96, "pf_speed_8k_bf16", true, true, 0, false},
		{"pf_speed_8k_bf16_wg_fp16_n128", 8192, 0, true, false, 5, 128, 128, "pf_speed_8k_bf16", true, true, 0, false},
		{"pf_speed_8k_bf16_wg_n48", 8192, 0, true, true, 5, 128, 48, "pf_speed_8k_bf16", true, false, 0, false},
		// flush_k (each K/V tile's p·v from zero, added to the rescaled
		// accumulator rounded to nearest) on the planner's tile and bytes
		// (128 × 16: the planner's with flush_k at head_dim 256, bf16 KV, q and
		// p split — its partial sum counted against the registers)
		{"pf_speed_8k_bf16_fk", 8192, 0, true, true, 5, 128, 32, "pf_speed_8k_bf16", false, false, 0, true},
		{"pf_speed_8k_bf16_fk_n16", 8192, 0, true, true, 5, 128, 16, "pf_speed_8k_bf16", false, false, 0, true},
		{"pf_speed_8k_bf16_n16", 8192, 0, true, true, 5, 128, 16, "pf_speed_8k_bf16", false, false, 0, false},
		{"pf_speed_32k_bucket_bf16_fk", 8192, 24576, true, true, 2, 128, 16, "pf_speed_32k_bucket_bf16", false, false, 0, true},
		{"pf_speed_1k_f32_fk", 1024, 0, false, true, 50, 128, 32, "pf_speed_1k_f32", false, false, 0, true},
	}
	for i, sp := range speeds {
		es := int64(4)
		if sp.bf16 {
			es = 2
		}
		sp.n /= scale
		sp.pos /= scale
		// The plans' capacity, so that a case's kernel is the plan's (ptxas's
		// registers and spills with them); the caches one period of 512
		// positions, tiled on the device.
		k := prefillKernel(hq, hkv, d, plans.DefaultContextTokens/scale, sp.bm, sp.bn, sp.bf16, sp.split, sp.split)
		if sp.wg {
			k = wgKernel(hq, hkv, d, plans.DefaultContextTokens/scale, sp.bm, sp.bn, 0, sp.split)
		}
		if sp.fp16 {
			k = wgFP16(k)
		}
		if sp.wg {
			k = wgStages(k, sp.stages)
		}
		if sp.flush {
			k = prefillFlush(k)
		}
		c := gpuCase{sp.name, k, sp.n, sp.pos}
		dir := filepath.Join(out, sp.name)
		var meta caseMeta
		readMeta := func(dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
		}
		switch {
		case sp.from == "" && sp.pos == 0:
			writeCaseTiled(t, dir, c, uint64(4000+i), 512)
			readMeta(dir)
		case sp.from == "":
			// The reference covers the first tokens; the launch runs all n rows
			// (q, qg and out zero-extended past them on the device).
			c.n = prefillCheckTokens
			writeCaseTiled(t, dir, c, uint64(4000+i), 512)
			readMeta(dir)
			ls := caseLaunch(k, sp.n)
			meta.N, meta.Grid = sp.n, ls.Grid[:]
			for j := range meta.Args {
				switch meta.Args[j].File {
				case "q.in", "out.in":
					meta.Args[j].Elements = int64(sp.n) * hq * d
				case "qg.in":
					meta.Args[j].Elements = int64(sp.n) * 2 * hq * d
				}
			}
			want := filepath.Join(dir, "out.want")
			b, err := os.ReadFile(want)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(want, b[:prefillCheckTokens*hq*d*4], 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			readMeta(filepath.Join(out, sp.from))
			ls := caseLaunch(c.k, c.n)
			// The sibling's meta names its own kernel: the runner looks this
			// case's entry point up by name (attention_prefill_wg's speed
			// cases read attention_prefill's files).
			meta.Kernel = c.k.Name
			meta.Grid, meta.Block, meta.Shared, meta.InputsFrom = ls.Grid[:], ls.Block[:], ls.SharedBytes, sp.from
			meta.ATol, meta.RTol = 0, 0
			if !sp.split {
				meta.ATol, meta.RTol = prefillATol, prefillRTol // p as one bf16 term
			}
			src, err := Render(plan.SM90, c.k)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte(src.Code), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		flops := kernels.PrefillFLOPs(c.k.Params, sp.n, sp.pos)
		meta.TimeReps, meta.FLOPs = sp.reps, flops
		meta.Bytes = int64(sp.n)*hq*d*4*3 + 2*int64(sp.pos+sp.n)*hkv*d*es // the visible context's K/V, not the capacity
		mmas := kernels.PrefillMMAs(c.k.Params)
		meta.Note = fmt.Sprintf("causal prefill of %d rows from position %d, %s KV, tile %d × %d, %d products per pair (2: plain bf16): %.3g TFLOP of attention; at 400 TFLOP/s of products %.0f µs",
			sp.n, sp.pos, map[bool]string{false: "f32", true: "bf16"}[sp.bf16], sp.bm, sp.bn, mmas, float64(flops)/1e12, float64(flops)*float64(mmas)/2/400e12*1e6)
		b, _ := json.MarshalIndent(meta, "", " ")
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, c := range append(prefillCases(), wgCases()...) {
		names = append(names, c.name)
	}
	for _, sp := range speeds {
		names = append(names, sp.name)
	}
	checkCaseEntries(t, out, append(names, "pf_cached128k_bf16"))
}

// checkCaseEntries holds the named cases written under dir to the runner's
// lookup: meta.json's kernel is the entry point its kernel.cu defines (a
// speed case reading a sibling's files once carried the sibling's name, and
// every attention_prefill_wg speed case failed to load on the H200).
func checkCaseEntries(t *testing.T, dir string, names []string) {
	t.Helper()
	for _, name := range names {
		m := filepath.Join(dir, name, "meta.json")
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		var meta caseMeta
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join(filepath.Dir(m), "kernel.cu"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), "KERNEL void "+meta.Kernel+"(") {
			t.Errorf("%s: kernel %q is not the entry point of its kernel.cu", filepath.Dir(m), meta.Kernel)
		}
	}
}

// TestCompilePrefillAttention compiles every attention_prefill kernel of
// the cases for gfx1151 (WMMA) and to PTX for sm_90 (mma.sync, ldmatrix,
// cp.async): no scratch, VGPRs within budget, LDS (dynamic, so the launch
// rule's bytes) within 64 KiB for gfx1151's tile, no warnings.
func TestCompilePrefillAttention(t *testing.T) {
	c := clang(t)
	seen := map[string]bool{}
	var hip, cuda []hipcc.Source
	for i, gc := range prefillCases() {
		k := gc.k
		k.Name = fmt.Sprintf("%s_%d", k.Family, i)
		for _, target := range plan.GPUTargets() {
			if target == plan.GFX1151 && (k.Params.Int("block_n") != 16 || k.Params.Flag("flush_k")) {
				continue // the WMMA path takes one 16-position step per tile, and no flush_k
			}
			s, err := Render(target, k)
			if err != nil {
				t.Fatal(err)
			}
			code := strings.ReplaceAll(s.Code, k.Name, "k")
			if seen[string(target)+code] {
				continue
			}
			seen[string(target)+code] = true
			if target == plan.GFX1151 {
				if b := kernels.PrefillSharedBytes(k.Params); b > maxLDS {
					t.Errorf("%s: %d bytes of LDS", k.Name, b)
				}
				hip = append(hip, hipcc.Source{Name: k.Name, Code: s.Code})
			} else {
				cuda = append(cuda, hipcc.Source{Name: k.Name, Code: s.Code})
			}
		}
	}
	results, err := c.Compile(context.Background(), hipcc.GFX1151, hip, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		res := r.Resources
		t.Logf("%-28s vgpr %3d lds %6d scratch %d", r.Name, res.VGPRs, res.LDSBytes, res.ScratchBytes)
		if why := res.Spills(); why != "" || res.ScratchBytes != 0 || res.VGPRs == 0 || res.VGPRs > maxVGPRs || res.LDSBytes > maxLDS {
			t.Errorf("%s: %+v %s", r.Name, res, why)
		}
		if strings.Contains(r.Log, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", r.Name, r.Log)
		}
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), cuda, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !strings.Contains(string(r.Object), ".entry "+r.Name) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: PTX without its entry or with warnings:\n%s", r.Name, r.Log)
		}
		if !strings.Contains(string(r.Object), "mma.sync.aligned.m16n8k16") {
			t.Errorf("%s: no mma.sync in the PTX", r.Name)
		}
	}
	if len(results) == 0 || len(ptx) == 0 {
		t.Fatal("nothing compiled")
	}
}

// wgKernel is an attention_prefill_wg kernel over a bf16 cache with q and
// p split or not; stages 0 takes the planner's K and V buffers
// (kernels.WGStages), 1 one of each.
func wgKernel(hq, hkv, d, capacity, bm, bn, stages int, split bool) plan.Kernel {
	k := prefillKernel(hq, hkv, d, capacity, bm, bn, true, split, false)
	k.Family = string(ir.AttentionPrefillWG)
	k.Name = k.Family
	k.Params.SetFlag("fp16", false)
	return wgStages(k, stages)
}

// wgStages sets a kernel's K and V buffers: the planner's (0) or one each.
func wgStages(k plan.Kernel, stages int) plan.Kernel {
	ks, vs := kernels.WGStages(k.Params, plan.SM90.Launch().MaxSharedBytes)
	if stages == 1 {
		ks, vs = 1, 1
	}
	k.Params.SetInt("k_stages", int64(ks))
	k.Params.SetInt("v_stages", int64(vs))
	return k
}

// wgFP16 is an attention_prefill_wg kernel with q, k, v and p as one fp16
// term each, with the planner's K and V buffers for it.
func wgFP16(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("fp16", true)
	k.Params.SetFlag("split_q", false)
	k.Params.SetFlag("split_p", false)
	return wgStages(k, 0)
}

// wgCases are attention_prefill_wg's correctness cases, at the same
// tolerances as attention_prefill's (split q and p: the runner's f32
// tolerance; plain: prefillATol), outputs poisoned past the logical rows
// as every case's: the real model's heads at the planner's tile (128 × 64,
// two V buffers) at T = 1 (one K/V tile: the prologue's q·kᵀ and the last
// p·v only), 63, 64, 65 (a tile of 128 packed rows is 16 tokens), 200 rows
// and 1000 rows from the start, segments after cached rows (65 after 100,
// 1 after 219, 100 after 3000) and one ending at the cache's last
// position, plain bf16 operands; then the cases that tell the layouts
// apart when one fails: k all zero (_k0: p·v and the softmax without the
// score product), head_dim 64 (one column block: V's leading byte
// offset unused) and 128, one warpgroup (block_m 64), 16 and 32
// positions a tile (128 spills: 64 score and 64 p registers beside the
// accumulator's 128), one K and one V buffer (the planner's split tile
// has one K buffer and two V buffers, the others two of each), a group of
// 3 (tiles cut mid-token) and one KV head per query head; and fp16
// operands (q an f32 value the
// kernel rounds; the plain tolerance, prefillATol: each operand within
// 2⁻¹¹ of itself where bf16's is 2⁻⁸) at T = 1, 200 rows, a cached
// segment, head_dim 64 and 96 and 128 positions a tile (their registers
// fit with one-term p); split q and p at 48 positions (not a power of two).
func wgCases() []gpuCase {
	real := func(capacity int) plan.Kernel { return wgKernel(16, 2, 256, capacity, 128, 64, 0, true) }
	return []gpuCase{
		{"wg_t1", real(80), 1, 0},
		{"wg_t63", real(80), 63, 0},
		{"wg_t64", real(80), 64, 0},
		{"wg_t65", real(80), 65, 0},
		{"wg_t200", real(260), 200, 3},
		{"wg_t1000", real(1024), 1000, 0},
		{"wg_cached65", real(300), 65, 100},
		{"wg_cached1", real(300), 1, 219},
		{"wg_cached100", real(3200), 100, 3000},
		{"wg_full", real(300), 37, 263},
		{"wg_plain", wgKernel(16, 2, 256, 300, 128, 64, 0, false), 65, 100},
		{"wg_hd64", wgKernel(8, 1, 64, 200, 128, 64, 0, true), 37, 20},
		{"wg_hd128", wgKernel(16, 2, 128, 200, 128, 64, 0, true), 37, 20},
		{"wg_m64", wgKernel(16, 2, 256, 300, 64, 64, 0, true), 65, 100},
		{"wg_n16", wgKernel(16, 2, 256, 300, 128, 16, 0, true), 65, 100},
		{"wg_n32", wgKernel(16, 2, 256, 300, 128, 32, 0, true), 65, 100},
		{"wg_v1", wgKernel(16, 2, 256, 300, 128, 64, 1, true), 65, 100},
		{"wg_group3", wgKernel(6, 2, 64, 120, 128, 64, 0, true), 43, 10},
		{"wg_mha", wgKernel(2, 2, 128, 90, 128, 32, 0, true), 70, 17},
		{"wg_cached65_k0", real(300), 65, 100},
		{"wg_fp16_t1", wgFP16(real(80)), 1, 0},
		{"wg_fp16_t200", wgFP16(real(260)), 200, 3},
		{"wg_fp16_cached65", wgFP16(real(300)), 65, 100},
		{"wg_fp16_hd64", wgFP16(wgKernel(8, 1, 64, 200, 128, 64, 0, true)), 37, 20},
		{"wg_fp16_n96", wgFP16(wgKernel(16, 2, 256, 300, 128, 96, 0, true)), 65, 100},
		{"wg_fp16_n128", wgFP16(wgKernel(16, 2, 256, 300, 128, 128, 0, true)), 65, 100},
		{"wg_n48", wgKernel(16, 2, 256, 300, 128, 48, 0, true), 65, 100},
	}
}

// TestCompilePrefillAttentionWG compiles every attention_prefill_wg kernel
// of the cases and of the speed table to PTX for sm_90a (clang's CUDA front
// end: the wgmma operand lists and constraints) and checks that the PTX
// holds the warpgroup products. Where a ptxas is on PATH (it is not part of
// the build: nvcc brings one) the PTX is assembled too: no spills, and no
// C7514 (ptxas serializing the products because something reads an
// accumulator between a wgmma's issue and its wait).
func TestCompilePrefillAttentionWG(t *testing.T) {
	c := clang(t)
	ks := []plan.Kernel{wgKernel(16, 2, 256, plans.DefaultContextTokens, 128, 64, 0, true), wgKernel(16, 2, 256, plans.DefaultContextTokens, 128, 64, 0, false)}
	for _, gc := range wgCases() {
		ks = append(ks, gc.k)
	}
	seen := map[string]bool{}
	var cuda []hipcc.Source
	for i, k := range ks {
		// One capacity for all (a constant of the code, nothing else): each
		// distinct kernel compiles once.
		k.Params = k.Params.Clone()
		k.Params.SetInt("capacity", int64(plans.DefaultContextTokens))
		k.Name = fmt.Sprintf("wg_%d", i)
		s, err := Render(plan.SM90, k)
		if err != nil {
			t.Fatal(err)
		}
		if code := strings.ReplaceAll(s.Code, k.Name, "k"); !seen[code] {
			seen[code] = true
			cuda = append(cuda, hipcc.Source{Name: k.Name, Code: s.Code})
		}
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), cuda, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ptxas, _ := exec.LookPath("ptxas")
	for _, r := range ptx {
		if !strings.Contains(string(r.Object), ".entry "+r.Name) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: PTX without its entry or with warnings:\n%s", r.Name, r.Log)
		}
		if !strings.Contains(string(r.Object), "wgmma.mma_async.sync.aligned.m64n") {
			t.Errorf("%s: no wgmma in the PTX", r.Name)
		}
		if ptxas == "" {
			continue
		}
		dir := t.TempDir()
		src := filepath.Join(dir, "k.ptx")
		if err := os.WriteFile(src, r.Object, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", src, "-o", filepath.Join(dir, "k.cubin")).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: ptxas: %v\n%s", r.Name, err, out)
		}
		res, err := hipcc.ParsePtxasVerbose(string(out))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v", r.Name, res[r.Name])
		if why := res[r.Name].Spills(); why != "" || strings.Contains(string(out), "C7514") {
			t.Errorf("%s: %s\n%s", r.Name, why, out)
		}
	}
	if len(ptx) == 0 {
		t.Fatal("nothing compiled")
	}
}
