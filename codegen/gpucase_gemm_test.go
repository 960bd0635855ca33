package codegen

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// gemmKern is a tensor-core GEMM case kernel of the shape K → N, its
// activations as terms bf16 terms (sm_90's plans: three; gfx1151's: two),
// on the mma tile.
func gemmKern(family string, k, n float64, terms int) plan.Kernel {
	return kern(family, termsParams(map[string]float64{"k": k, "n": n, "tile_n": kernels.GEMMTileCols, "wgmma": 0, "wgmma_ws": 0}, terms))
}

// termsParams is p with the flags that stage A in terms bf16 terms.
func termsParams(p map[string]float64, terms int) map[string]float64 {
	p["split_a"], p["split_a3"] = flagValue(terms >= 2), flagValue(terms >= 3)
	return p
}

// gemmKernWGMMA is gemmKern on the wgmma tile of cols columns (sm_90a only).
func gemmKernWGMMA(family string, k, n float64, terms, cols int) plan.Kernel {
	kk := wgmmaKernel(gemmKern(family, k, n, terms))
	kk.Params.SetInt("tile_n", int64(cols))
	return kk
}

// wgmmaKernel is k (a tiled GEMM family's) on the wgmma tile.
func wgmmaKernel(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("wgmma", true)
	return k
}

// gemmKernWide is gemmKern with the 256-column tile (sm_90 only: its
// shared memory is past gfx1151's LDS).
func gemmKernWide(family string, k, n float64, terms int) plan.Kernel {
	kk := gemmKern(family, k, n, terms)
	kk.Params.SetInt("tile_n", kernels.GEMMTileColsWide)
	return kk
}

// flushKern is k (a tiled GEMM family's) with flush_k: each k-tile's
// products summed apart and added in with round-to-nearest FADDs, on the
// 128-column tile the flag takes.
func flushKern(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("flush_k", true)
	if k.Params.Int("tile_n") != 0 {
		k.Params.SetInt("tile_n", kernels.GEMMTileCols)
	}
	return k
}

// flushHalvesKern is k on the wgmma tile of 256 columns with flush_k: each
// k-tile's products flushed half the columns at a time.
func flushHalvesKern(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("flush_k", true)
	return k
}

// flush16Kern is flushKern with flush_k16: on the wgmma tile every 16-deep
// slice's products summed apart (the mma tile's grain with flush_k alone).
func flush16Kern(k plan.Kernel) plan.Kernel {
	k = flushKern(k)
	k.Params.SetFlag("flush_k16", true)
	return k
}

// wideTile says whether a case takes the 256-column tile.
func wideTile(k plan.Kernel) bool { return k.Params.Int("tile_n") == kernels.GEMMTileColsWide }

// sm90Tile says whether a case's tile is sm_90's alone: the wide tile, three
// A terms (gfx1151's 64 KiB hold two), or the wgmma tile (sm_90a).
func sm90Tile(k plan.Kernel) bool {
	return wideTile(k) || kernels.ATerms(k.Params) == 3 || k.Params.Flag("wgmma") || k.Params.Flag("wgmma_ws")
}

// flagValue is a case parameter's value for a flag.
func flagValue(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// gemmCases are the tensor-core GEMM family's correctness cases: rows
// 1, 63, 65, 130 and 257 (a partial tile, one past a tile, several tiles), N
// and K odd multiples of 8 and not multiples of 8 at all (the one-element
// staging of W and A), K shorter than one k-tile, the tiny fixtures' shapes
// and the model's, with x as three bf16 terms (sm_90's plans), a few as two
// (gfx1151's) and a few as one. The references stage x as the kernels do (kernels.StageA), so
// only the order of the fp32 sums differs: gpucheck's f32 tolerance (2e-4 +
// 1e-3·|want|) holds with a wide margin (K = 4096: ≈ 1e-5).
var gemmCases = []gpuCase{
	{"gemm_t1", gemmKern("gemm", 2048, 8192, 3), 1, 0},
	{"gemm_t63", gemmKern("gemm", 2048, 264, 3), 63, 0},
	{"gemm_t65", gemmKern("gemm", 2048, 264, 3), 65, 0},
	{"gemm_t257", gemmKern("gemm", 4096, 2048, 3), 257, 0},
	{"gemm_odd8", gemmKern("gemm", 2056, 136, 3), 130, 0},
	{"gemm_kodd", gemmKern("gemm", 20, 7, 3), 65, 0},
	{"gemm_kodd_wide", gemmKern("gemm", 1001, 300, 3), 129, 0},
	{"gemm_kshort", gemmKern("gemm", 8, 24, 3), 3, 0},
	{"gemm_tiny_qkv", gemmKern("gemm", 64, 192, 3), 63, 0},
	{"gemm_tiny_down", gemmKern("gemm", 32, 64, 3), 65, 0},
	{"gemm_add_t65", gemmKern("gemm_add", 4096, 2048, 3), 65, 0},
	{"gemm_add_odd", gemmKern("gemm_add", 20, 7, 3), 63, 0},
	{"gemm_add_tiny", gemmKern("gemm_add", 64, 64, 3), 1, 0},
	// Two terms (gfx1151's plans), on sm_90 too.
	{"gemm_s2_t65", gemmKern("gemm", 2048, 264, 2), 65, 0},
	{"gemm_s2_kodd", gemmKern("gemm", 20, 7, 2), 65, 0},
	{"gemm_add_s2_t257", gemmKern("gemm_add", 4096, 2048, 2), 257, 0},
	{"gemm_wide_s2_t65", gemmKernWide("gemm", 2048, 264, 2), 65, 0},
	// One bf16 term (split_a off), the path the split replaced.
	{"gemm_plain_t65", gemmKern("gemm", 2048, 264, 1), 65, 0},
	{"gemm_plain_kodd", gemmKern("gemm", 20, 7, 1), 65, 0},
	{"gemm_add_plain_t65", gemmKern("gemm_add", 4096, 2048, 1), 65, 0},
	// The 256-column tile (sm_90): a partial column tile, K % 8 ≠ 0, several row tiles.
	{"gemm_wide_t65", gemmKernWide("gemm", 2048, 264, 3), 65, 0},
	{"gemm_wide_kodd", gemmKernWide("gemm", 1001, 300, 3), 129, 0},
	{"gemm_add_wide_t257", gemmKernWide("gemm_add", 4096, 2048, 3), 257, 0},
	// The wgmma tile (sm_90a), 256 and 128 columns: rows 1, 63, 64, 65, 200 (a
	// warpgroup's 64 rows, one past, a partial second row tile), N and K not
	// multiples of the tile (N 264, 300, 7; K 2056: a partial k-tile of 64;
	// K 1001 and 20: W and A staged one element at a time), K shorter than
	// one k-tile, the tiny fixtures' shapes, gemm_add; three bf16 terms (sm_90's
	// plans), a few as two and one.
	// K of one 16-deep slice, one k-tile, two k-tiles: which of the slice
	// step, the k-tile and the pipeline a failure is in.
	{"gemm_wg_k16", gemmKernWGMMA("gemm", 16, 256, 3, 256), 64, 0},
	{"gemm_wg128_k16", gemmKernWGMMA("gemm", 16, 128, 1, 128), 128, 0},
	{"gemm_wg_k64", gemmKernWGMMA("gemm", 64, 256, 3, 256), 128, 0},
	{"gemm_wg_k128", gemmKernWGMMA("gemm", 128, 512, 3, 256), 256, 0},
	{"gemm_wg_t1", gemmKernWGMMA("gemm", 2048, 8192, 3, 256), 1, 0},
	{"gemm_wg_t63", gemmKernWGMMA("gemm", 2048, 264, 3, 256), 63, 0},
	{"gemm_wg_t64", gemmKernWGMMA("gemm", 2048, 264, 3, 256), 64, 0},
	{"gemm_wg_t65", gemmKernWGMMA("gemm", 2048, 264, 3, 256), 65, 0},
	{"gemm_wg_t200", gemmKernWGMMA("gemm", 2056, 520, 3, 256), 200, 0},
	{"gemm_wg_kodd", gemmKernWGMMA("gemm", 1001, 300, 3, 256), 129, 0},
	{"gemm_wg_kodd4", gemmKernWGMMA("gemm", 20, 7, 3, 256), 65, 0},
	{"gemm_wg_kshort", gemmKernWGMMA("gemm", 8, 24, 3, 256), 3, 0},
	{"gemm_wg_tiny_qkv", gemmKernWGMMA("gemm", 64, 192, 3, 256), 63, 0},
	{"gemm_wg_tiny_down", gemmKernWGMMA("gemm", 32, 64, 3, 128), 65, 0},
	{"gemm_wg128_t65", gemmKernWGMMA("gemm", 2048, 264, 3, 128), 65, 0},
	{"gemm_wg128_t200", gemmKernWGMMA("gemm", 2056, 136, 3, 128), 200, 0},
	{"gemm_wg128_kodd", gemmKernWGMMA("gemm", 1001, 300, 3, 128), 129, 0},
	{"gemm_add_wg_t65", gemmKernWGMMA("gemm_add", 4096, 2048, 3, 256), 65, 0},
	{"gemm_add_wg_t257", gemmKernWGMMA("gemm_add", 4096, 2048, 3, 256), 257, 0},
	{"gemm_add_wg_odd", gemmKernWGMMA("gemm_add", 20, 7, 3, 256), 63, 0},
	{"gemm_add_wg128_t65", gemmKernWGMMA("gemm_add", 4096, 2048, 3, 128), 65, 0},
	{"gemm_wg_plain_t65", gemmKernWGMMA("gemm", 2048, 264, 1, 256), 65, 0},
	{"gemm_add_wg_plain_t200", gemmKernWGMMA("gemm_add", 4096, 2048, 1, 128), 200, 0},
	{"gemm_wg_s2_t65", gemmKernWGMMA("gemm", 2048, 264, 2, 256), 65, 0},
	{"gemm_add_wg128_s2_t257", gemmKernWGMMA("gemm_add", 4096, 2048, 2, 128), 257, 0},
	// flush_k (each k-tile's sum apart, added in round to nearest) on both
	// tiles: rows 1, 3, 63, 65, 200, 257 (partial row tiles), K of one slice,
	// one and two k-tiles, K not a multiple of the k-tile (2056, 1001, 20, 8),
	// N not a multiple of the tile (264, 300, 136, 7), the tiny fixtures'
	// shapes, gemm_add; three terms, two (gfx1151's) and one.
	{"gemm_fk_t65", flushKern(gemmKern("gemm", 2048, 264, 3)), 65, 0},
	{"gemm_fk_odd8", flushKern(gemmKern("gemm", 2056, 136, 3)), 130, 0},
	{"gemm_fk_kodd", flushKern(gemmKern("gemm", 1001, 300, 3)), 129, 0},
	{"gemm_fk_kshort", flushKern(gemmKern("gemm", 8, 24, 3)), 3, 0},
	{"gemm_fk_tiny_qkv", flushKern(gemmKern("gemm", 64, 192, 3)), 63, 0},
	{"gemm_add_fk_t257", flushKern(gemmKern("gemm_add", 4096, 2048, 3)), 257, 0},
	{"gemm_fk_s2_t65", flushKern(gemmKern("gemm", 2048, 264, 2)), 65, 0},
	{"gemm_fk_s2_kodd", flushKern(gemmKern("gemm", 20, 7, 2)), 65, 0},
	{"gemm_fk_s2_tiny_down", flushKern(gemmKern("gemm", 32, 64, 2)), 65, 0},
	{"gemm_add_fk_s2_t200", flushKern(gemmKern("gemm_add", 4096, 2048, 2)), 200, 0},
	{"gemm_fk_plain_kodd", flushKern(gemmKern("gemm", 20, 7, 1)), 65, 0},
	{"gemm_wg_fk_k16", flushKern(gemmKernWGMMA("gemm", 16, 128, 3, 128)), 128, 0},
	{"gemm_wg_fk_k64", flushKern(gemmKernWGMMA("gemm", 64, 256, 3, 128)), 128, 0},
	{"gemm_wg_fk_k128", flushKern(gemmKernWGMMA("gemm", 128, 512, 3, 128)), 256, 0},
	{"gemm_wg_fk_t1", flushKern(gemmKernWGMMA("gemm", 2048, 8192, 3, 128)), 1, 0},
	{"gemm_wg_fk_t65", flushKern(gemmKernWGMMA("gemm", 2048, 264, 3, 128)), 65, 0},
	{"gemm_wg_fk_t200", flushKern(gemmKernWGMMA("gemm", 2056, 136, 3, 128)), 200, 0},
	{"gemm_wg_fk_kodd", flushKern(gemmKernWGMMA("gemm", 1001, 300, 3, 128)), 129, 0},
	{"gemm_wg_fk_kodd4", flushKern(gemmKernWGMMA("gemm", 20, 7, 3, 128)), 65, 0},
	{"gemm_wg_fk_kshort", flushKern(gemmKernWGMMA("gemm", 8, 24, 3, 128)), 3, 0},
	{"gemm_wg_fk_tiny_qkv", flushKern(gemmKernWGMMA("gemm", 64, 192, 3, 128)), 63, 0},
	{"gemm_wg_fk_tiny_down", flushKern(gemmKernWGMMA("gemm", 32, 64, 3, 128)), 65, 0},
	{"gemm_add_wg_fk_t257", flushKern(gemmKernWGMMA("gemm_add", 4096, 2048, 3, 128)), 257, 0},
	{"gemm_add_wg_fk_odd", flushKern(gemmKernWGMMA("gemm_add", 20, 7, 3, 128)), 63, 0},
	{"gemm_wg_fk_s2_t65", flushKern(gemmKernWGMMA("gemm", 2048, 264, 2, 128)), 65, 0},
	{"gemm_wg_fk_plain_t65", flushKern(gemmKernWGMMA("gemm", 2048, 264, 1, 128)), 65, 0},
	// flush_k16 (every slice's sum apart) on the wgmma tile, and on the mma
	// tile (the same as flush_k there).
	{"gemm_wg_fk16_k16", flush16Kern(gemmKernWGMMA("gemm", 16, 128, 3, 128)), 128, 0},
	{"gemm_wg_fk16_k64", flush16Kern(gemmKernWGMMA("gemm", 64, 256, 3, 128)), 128, 0},
	{"gemm_wg_fk16_k128", flush16Kern(gemmKernWGMMA("gemm", 128, 512, 3, 128)), 256, 0},
	{"gemm_wg_fk16_t1", flush16Kern(gemmKernWGMMA("gemm", 2048, 8192, 3, 128)), 1, 0},
	{"gemm_wg_fk16_t65", flush16Kern(gemmKernWGMMA("gemm", 2048, 264, 3, 128)), 65, 0},
	{"gemm_wg_fk16_t200", flush16Kern(gemmKernWGMMA("gemm", 2056, 136, 3, 128)), 200, 0},
	{"gemm_wg_fk16_kodd", flush16Kern(gemmKernWGMMA("gemm", 1001, 300, 3, 128)), 129, 0},
	{"gemm_wg_fk16_kodd4", flush16Kern(gemmKernWGMMA("gemm", 20, 7, 3, 128)), 65, 0},
	{"gemm_wg_fk16_kshort", flush16Kern(gemmKernWGMMA("gemm", 8, 24, 3, 128)), 3, 0},
	{"gemm_wg_fk16_tiny_down", flush16Kern(gemmKernWGMMA("gemm", 32, 64, 3, 128)), 65, 0},
	{"gemm_add_wg_fk16_t257", flush16Kern(gemmKernWGMMA("gemm_add", 4096, 2048, 3, 128)), 257, 0},
	{"gemm_wg_fk16_s2_t65", flush16Kern(gemmKernWGMMA("gemm", 2048, 264, 2, 128)), 65, 0},
	{"gemm_fk16_s2_kodd", flush16Kern(gemmKern("gemm", 20, 7, 2)), 65, 0},
	// flush_k on the wgmma tile of 256 columns (half the columns at a time).
	{"gemm_wg256_fk_k16", flushHalvesKern(gemmKernWGMMA("gemm", 16, 256, 3, 256)), 64, 0},
	{"gemm_wg256_fk_k64", flushHalvesKern(gemmKernWGMMA("gemm", 64, 256, 3, 256)), 128, 0},
	{"gemm_wg256_fk_k128", flushHalvesKern(gemmKernWGMMA("gemm", 128, 512, 3, 256)), 256, 0},
	{"gemm_wg256_fk_t1", flushHalvesKern(gemmKernWGMMA("gemm", 2048, 8192, 3, 256)), 1, 0},
	{"gemm_wg256_fk_t65", flushHalvesKern(gemmKernWGMMA("gemm", 2048, 264, 3, 256)), 65, 0},
	{"gemm_wg256_fk_t200", flushHalvesKern(gemmKernWGMMA("gemm", 2056, 520, 3, 256)), 200, 0},
	{"gemm_wg256_fk_kodd", flushHalvesKern(gemmKernWGMMA("gemm", 1001, 300, 3, 256)), 129, 0},
	{"gemm_wg256_fk_kodd4", flushHalvesKern(gemmKernWGMMA("gemm", 20, 7, 3, 256)), 65, 0},
	{"gemm_wg256_fk_kshort", flushHalvesKern(gemmKernWGMMA("gemm", 8, 24, 3, 256)), 3, 0},
	{"gemm_wg256_fk_tiny_qkv", flushHalvesKern(gemmKernWGMMA("gemm", 64, 192, 3, 256)), 63, 0},
	{"gemm_add_wg256_fk_t257", flushHalvesKern(gemmKernWGMMA("gemm_add", 4096, 2048, 3, 256)), 257, 0},
	{"gemm_wg256_fk_s2_t65", flushHalvesKern(gemmKernWGMMA("gemm", 2048, 264, 2, 256)), 65, 0},
	{"gemm_wg256_fk_plain_t65", flushHalvesKern(gemmKernWGMMA("gemm", 2048, 264, 1, 256)), 65, 0},
}

// TestCompileGEMMCases compiles every tensor-core case kernel for gfx1151
// (no scratch, LDS within budget, the WMMA instruction present) and to PTX
// (mma.sync, ldmatrix and cp.async present, no warning).
func TestCompileGEMMCases(t *testing.T) {
	c := clang(t)
	cases := allTensorCases() // once: the cases' operands are megabytes of random numbers
	render := func(tg plan.Target) []hipcc.Source {
		var srcs []hipcc.Source
		for _, gc := range cases {
			if tg == plan.GFX1151 && sm90Tile(gc.k) {
				continue // sm_90's tile only
			}
			k := gc.k
			k.Name = gc.name
			s, err := Render(tg, k)
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
		}
		return srcs
	}
	// The instructions each tensor-core kernel must show in its PTX: every
	// one the mma atoms, cp.async where its weight rows are 16-byte aligned.
	tensorInstructions := map[string][]string{}
	for _, gc := range cases {
		if !strings.HasPrefix(gc.k.Family, "gemm") && !strings.HasSuffix(gc.k.Family, "_group") {
			continue
		}
		ins := []string{"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"}
		if gc.k.Params.Flag("wgmma_ws") {
			ins = wsInstructions(gc.k)
		} else if gc.k.Params.Flag("wgmma") {
			cols := gc.k.Params.Int("tile_n")
			if gc.k.Params.Flag("wide_tile") {
				cols = kernels.GEMMTileColsWide // the grouped GEMMs' 256 columns
			}
			if cols == 0 || gc.k.Params.Flag("flush_k") {
				cols = kernels.GEMMTileCols // the grouped GEMMs' tile; flush_k's products are 128 columns wide
			}
			ins = []string{fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", cols),
				"wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"}
			// (With cluster_a A is bulk copies, with ss_a register loads: cp.async carries W, 16-byte rows where K % 8 = 0.)
			// (ss_a fetches A into registers: 16-byte loads where K % 4 = 0.)
			aStaged := gc.k.Params.Flag("cluster_a") || gc.k.Params.Flag("ss_a")
			if tensorK(gc.k)%4 == 0 && (!aStaged || tensorK(gc.k)%8 == 0) {
				ins = append(ins, "cp.async.cg.shared.global")
			}
			if gc.k.Params.Flag("ss_a") && tensorK(gc.k)%4 == 0 {
				ins = append(ins, "ld.global.v4.f32", "st.shared.v4")
			}
			if gc.k.Params.Flag("cluster_a") {
				// The A rows multicast into both blocks, their barriers, the cluster's barrier.
				ins = append(ins, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
					"mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
					"barrier.cluster.arrive.release.aligned", "barrier.cluster.wait.acquire.aligned", "%cluster_ctarank")
			}
		} else if tensorK(gc.k)%8 == 0 {
			ins = append(ins, "cp.async.cg.shared.global")
		}
		// The epilogue's column pairs (mma_c_pairs) as 8-byte accesses where rows are even.
		if tensorWidth(gc.k)%2 == 0 {
			ins = append(ins, "st.global.v2.f32")
			if gc.k.Family == "gemm_add" {
				ins = append(ins, "ld.global.v2.f32")
			}
		}
		tensorInstructions[gc.name] = ins
	}
	// -Wunused-const-variable: nvcc -Werror all-warnings (the GPU check) refuses a
	// rendered constant that no variant uses.
	ptx, err := c.SyntaxCheckCUDA(context.Background(), render(plan.SM90), hipcc.Options{Flags: []string{"-Wunused-const-variable", "-Wunused-variable"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !bytes.Contains(r.Object, []byte(".entry "+r.Name)) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: no .entry in the PTX, or warnings:\n%s", r.Name, r.Log)
			continue
		}
		if want := tensorInstructions[r.Name]; want != nil {
			for _, ins := range want {
				if !bytes.Contains(r.Object, []byte(ins)) {
					t.Errorf("%s: no %s in the PTX", r.Name, ins)
				}
			}
		}
	}
	results, err := c.Compile(context.Background(), hipcc.GFX1151, render(plan.GFX1151), hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// LDS: the static part the compiler reports and the launch's dynamic part.
	dynamic := map[string]int{}
	for _, gc := range cases {
		dynamic[gc.name] = kernels.Families[ir.Kind(gc.k.Family)].Launch(gc.k.Params, gc.n, plan.GFX1151.Launch()).SharedBytes
	}
	for _, r := range results {
		if r.Object == nil {
			t.Errorf("%s: no code object\n%s", r.Name, r.Log)
			continue
		}
		lds := r.Resources.LDSBytes + dynamic[r.Name]
		if why := r.Resources.Spills(); why != "" || r.Resources.ScratchBytes != 0 || lds > maxLDS {
			t.Errorf("%s: scratch %q (%d bytes), LDS %d (%d dynamic)", r.Name, why, r.Resources.ScratchBytes, lds, dynamic[r.Name])
		}
		t.Logf("%s: gfx1151 %d VGPRs, LDS %d (%d dynamic)", r.Name, r.Resources.VGPRs, lds, dynamic[r.Name])
	}
}

// allTensorCases are the correctness cases of every tensor-core family.
func allTensorCases() []gpuCase {
	var out []gpuCase
	for _, c := range tensorCorrectness() {
		out = append(out, gpuCase{name: c.name, k: c.k, n: c.rows})
	}
	return out
}

// tensorK is the reduction length of a tensor-core kernel: k of a dense
// GEMM, hidden of the grouped gate_up, inter of the grouped down.
func tensorK(k plan.Kernel) int {
	switch k.Family {
	case "moe_gate_up_group":
		return k.Params.Int("hidden")
	case "moe_down_group":
		return k.Params.Int("inter")
	}
	return k.Params.Int("k")
}

// tensorWidth is the row length of a tensor-core kernel's output: n of a
// dense GEMM, inter of the grouped gate_up's act, hidden of the grouped
// down's ys.
func tensorWidth(k plan.Kernel) int {
	switch k.Family {
	case "moe_gate_up_group":
		return k.Params.Int("inter")
	case "moe_down_group":
		return k.Params.Int("hidden")
	}
	return k.Params.Int("n")
}
