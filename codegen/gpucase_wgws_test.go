package codegen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// wsKernel is k (a tiled GEMM family's) on the warp-specialized wgmma tile
// (gemm_wgmma_ws.tmpl) instead of its own.
func wsKernel(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("wgmma", false)
	k.Params.SetFlag("wgmma_ws", true)
	delete(k.Params.Flags, "flush_k") // the tile rounds its k-tiles' sums itself
	delete(k.Params.Flags, "flush_k16")
	return k
}

// gemmKernWS is gemmKern on the warp-specialized tile of cols columns.
func gemmKernWS(family string, k, n float64, terms, cols int) plan.Kernel {
	kk := wsKernel(gemmKern(family, k, n, terms))
	kk.Params.SetInt("tile_n", int64(cols))
	return kk
}

// wsGEMMCases are the warp-specialized tile's dense cases: the wgmma
// tile's shapes (a 16-deep slice, one and two k-tiles, rows 1, 63, 64, 65,
// 200, N 7 / 264 / 300 / 520, K 1001 and 20: W, and for 1001 A, staged one
// element at a time; K 2056: a partial k-tile) and rows 129 with N 24 and
// 136 (odd K too), both widths, gemm_add, three terms (the plans'), two, one.
var wsGEMMCases = []gpuCase{
	{"gemm_ws_k16", gemmKernWS("gemm", 16, 256, 3, 256), 64, 0},
	{"gemm_ws128_k16", gemmKernWS("gemm", 16, 128, 1, 128), 128, 0},
	{"gemm_ws_k64", gemmKernWS("gemm", 64, 256, 3, 256), 128, 0},
	{"gemm_ws_k128", gemmKernWS("gemm", 128, 512, 3, 256), 256, 0},
	{"gemm_ws_t1", gemmKernWS("gemm", 2048, 8192, 3, 256), 1, 0},
	{"gemm_ws_t63", gemmKernWS("gemm", 2048, 264, 3, 256), 63, 0},
	{"gemm_ws_t64", gemmKernWS("gemm", 2048, 264, 3, 256), 64, 0},
	{"gemm_ws_t65", gemmKernWS("gemm", 2048, 264, 3, 256), 65, 0},
	{"gemm_ws_t129_n24", gemmKernWS("gemm", 2056, 24, 3, 256), 129, 0},
	{"gemm_ws_t129_n136", gemmKernWS("gemm", 1001, 136, 3, 256), 129, 0},
	{"gemm_ws_t200", gemmKernWS("gemm", 2056, 520, 3, 256), 200, 0},
	{"gemm_ws_kodd", gemmKernWS("gemm", 1001, 300, 3, 256), 129, 0},
	{"gemm_ws_kodd4", gemmKernWS("gemm", 20, 7, 3, 256), 65, 0},
	{"gemm_ws_kshort", gemmKernWS("gemm", 8, 24, 3, 256), 3, 0},
	{"gemm_ws_tiny_qkv", gemmKernWS("gemm", 64, 192, 3, 256), 63, 0},
	{"gemm_ws_tiny_down", gemmKernWS("gemm", 32, 64, 3, 128), 65, 0},
	{"gemm_ws128_t65", gemmKernWS("gemm", 2048, 264, 3, 128), 65, 0},
	{"gemm_ws128_t129_n24", gemmKernWS("gemm", 2056, 24, 3, 128), 129, 0},
	{"gemm_ws128_t200", gemmKernWS("gemm", 2056, 136, 3, 128), 200, 0},
	{"gemm_ws128_kodd", gemmKernWS("gemm", 1001, 300, 3, 128), 129, 0},
	{"gemm_add_ws_t65", gemmKernWS("gemm_add", 4096, 2048, 3, 256), 65, 0},
	{"gemm_add_ws_t257", gemmKernWS("gemm_add", 4096, 2048, 3, 256), 257, 0},
	{"gemm_add_ws_odd", gemmKernWS("gemm_add", 20, 7, 3, 256), 63, 0},
	{"gemm_add_ws128_t65", gemmKernWS("gemm_add", 4096, 2048, 3, 128), 65, 0},
	{"gemm_ws_plain_t65", gemmKernWS("gemm", 2048, 264, 1, 256), 65, 0},
	{"gemm_add_ws_plain_t200", gemmKernWS("gemm_add", 4096, 2048, 1, 128), 200, 0},
	{"gemm_ws_s2_t65", gemmKernWS("gemm", 2048, 264, 2, 256), 65, 0},
	{"gemm_add_ws128_s2_t257", gemmKernWS("gemm_add", 4096, 2048, 2, 128), 257, 0},
}

// wsCorrectness are the warp-specialized tile's correctness cases: the
// dense ones, and the grouped GEMMs on copies of the wgmma tile's grouped
// cases in have (the tiny fixtures' experts at 1 and 65 tokens, odd sizes,
// several tiles of one expert, the model's widths, two terms, one).
// Tolerance and references as gemmCases says.
func wsCorrectness(have []tensorCase) []tensorCase {
	var out []tensorCase
	for i, c := range wsGEMMCases {
		out = append(out, gemmCase(c.name, c.k, c.n, c.n, uint64(700+i)))
	}
	for _, c := range have {
		if !strings.HasPrefix(c.name, "moe_wg_") {
			continue
		}
		c.name = "moe_ws_" + strings.TrimPrefix(c.name, "moe_wg_")
		c.k = wsKernel(c.k)
		c.mem, c.stored = cloneMem(c.mem), maps.Clone(c.stored)
		out = append(out, c)
	}
	return out
}

// wsInstructions are what a warp-specialized case's PTX must show: the
// partial sums' products, the ring's mbarriers, the register split, cp.async
// for W where its rows are 16-byte aligned and the bulk copies of A where
// its rows are.
func wsInstructions(k plan.Kernel) []string {
	ins := []string{fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", kernels.GEMMWSPart), "wgmma.wait_group.sync.aligned 0",
		"mbarrier.try_wait.parity.shared::cta.b64", "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
		"setmaxnreg.dec.sync.aligned.u32 24", "setmaxnreg.inc.sync.aligned.u32 240", "fence.proxy.async.shared::cta"}
	if tensorK(k)%8 == 0 {
		ins = append(ins, "cp.async.cg.shared.global")
	}
	if tensorK(k)%4 == 0 {
		ins = append(ins, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", "mbarrier.arrive.expect_tx.shared::cta.b64")
	}
	return ins
}

// writeWSSpeed writes the warp-specialized tile's speed cases on the files
// of the dense speed cases and of the grouped gate_up and down (8192 rows):
// 256 and 128 columns with three terms, 256 with two and one, beside the
// wgmma tile's (_wg, _wg128, _wg_s2, _wg_plain) on the same files.
func writeWSSpeed(t *testing.T, out string, rows int, dense []tensorCase, gateUp, down tensorCase) {
	t.Helper()
	cols := func(k plan.Kernel, n int) plan.Kernel {
		k = wsKernel(k)
		k.Params.SetInt("tile_n", int64(n))
		return k
	}
	terms := func(k plan.Kernel, n int) plan.Kernel {
		k.Params = k.Params.Clone()
		k.Params.SetFlag("split_a", n >= 2)
		k.Params.SetFlag("split_a3", n >= 3)
		return k
	}
	for _, c := range dense {
		writeSibling(t, out, c.name+"_ws", cols(c.k, kernels.GEMMTileColsWide), rows, c.name, 20, "the warp-specialized wgmma tile, 128 × 256, three terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_ws128", cols(c.k, kernels.GEMMTileCols), rows, c.name, 20, "the warp-specialized wgmma tile, 128 × 128, three terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_ws_s2", terms(cols(c.k, kernels.GEMMTileColsWide), 2), rows, c.name, 20, "the warp-specialized wgmma tile, 128 × 256, two terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_ws_plain", terms(cols(c.k, kernels.GEMMTileColsWide), 1), rows, c.name, 20, "the warp-specialized wgmma tile, 128 × 256, one term, on "+c.name+"'s files")
	}
	writeSibling(t, out, gateUp.name+"_ws", wsKernel(gateUp.k), rows, gateUp.name, 20, "the warp-specialized wgmma tile, three terms, on "+gateUp.name+"'s files")
	writeSibling(t, out, down.name+"_ws", wsKernel(down.k), rows, down.name, 20, "the warp-specialized wgmma tile, three terms, on "+down.name+"'s files")
}

// wsPrecision are the precision cases: a full row tile (128 rows) at the
// model's reduction lengths, x off the bf16 grid (three terms carry it), W
// bf16, against y in float64 rounded once to f32. The warp-specialized tile
// writes the case; the wgmma tile (which accumulates in the tensor cores
// across all of K) and the mma tile read its files: their max_abs_err are the
// figures to compare (the tolerance is loose on purpose: these cases
// measure, the correctness cases gate).
var wsPrecision = []struct {
	name string
	k, n int
}{
	{"prec_ws_k2048", 2048, 2048},
	{"prec_ws_k4096", 4096, 1024},
	{"prec_ws_k8192", 8192, 512},
}

const (
	precATol = 1e-3
	precRTol = 1e-3
)

// TestWriteGPUCasesWGWSPrecision writes wsPrecision and the siblings that
// run the other tiles on their files.
func TestWriteGPUCasesWGWSPrecision(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	const rows = kernels.GEMMTileRows
	for i, pc := range wsPrecision {
		k := gemmKernWS("gemm", float64(pc.k), float64(pc.n), 3, kernels.GEMMTileColsWide)
		c := gemmCase(pc.name, k, rows, rows, uint64(800+i))
		c.ref = func(a *ir.Args) error {
			y, x, w := a.F32("y"), a.F32("x"), a.BF16("w")
			for r := range a.N {
				for j := range pc.n {
					var s float64
					for q := range pc.k {
						s += float64(x[r*pc.k+q]) * float64(bf16.ToFloat32(w[j*pc.k+q]))
					}
					y[r*pc.n+j] = float32(s)
				}
			}
			return nil
		}
		c.note = fmt.Sprintf("precision: %d × %d → %d against float64 (max_abs_err is the figure)", rows, pc.k, pc.n)
		dir := filepath.Join(out, pc.name)
		writeTensorCase(t, dir, c)
		setTolerance(t, dir, precATol, precRTol)
		wg := gemmKernWGMMA("gemm", float64(pc.k), float64(pc.n), 3, kernels.GEMMTileColsWide)
		name := strings.Replace(pc.name, "_ws_", "_wg_", 1)
		writeSibling(t, out, name, wg, rows, pc.name, 0, "precision: the wgmma tile on "+pc.name+"'s files, against float64")
		mma := gemmKernWide("gemm", float64(pc.k), float64(pc.n), 3)
		name = strings.Replace(pc.name, "_ws_", "_mma_", 1)
		writeSibling(t, out, name, mma, rows, pc.name, 0, "precision: the mma tile on "+pc.name+"'s files, against float64")
	}
}

// setTolerance sets a written case's atol and rtol.
func setTolerance(t *testing.T, dir string, atol, rtol float64) {
	t.Helper()
	path := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta tensorMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	meta.ATol, meta.RTol = atol, rtol
	mb, _ := json.MarshalIndent(meta, "", " ")
	if err := os.WriteFile(path, mb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWSLaunch holds the warp-specialized tile's launch: three warpgroups,
// the ring within the target's shared memory (three stages of 68 KiB at 256
// columns, four of 52 KiB at 128), the other tiles' blocks unchanged, and
// both wgmma tiles at once refused.
func TestWSLaunch(t *testing.T) {
	c := plan.SM90.Launch()
	for _, tc := range []struct {
		k      plan.Kernel
		block  int
		shared int
	}{
		{gemmKernWS("gemm", 2048, 8192, 3, 256), kernels.GEMMWSThreads, 1024 + 3*(128*288+256*128+16) + 128*5*8},
		{gemmKernWS("gemm", 2048, 8192, 3, 128), kernels.GEMMWSThreads, 1024 + 4*(128*288+128*128+16) + 128*3*8},
		{gemmKernWGMMA("gemm", 2048, 8192, 3, 256), c.Threads, 1024 + 3*(128*64*4+256*64*2)},
	} {
		s := kernels.Families[ir.Kind(tc.k.Family)].Launch(tc.k.Params, 8192, c)
		if s.Block[0] != tc.block || s.SharedBytes != tc.shared || s.SharedBytes > c.MaxSharedBytes {
			t.Errorf("%v: block %d, shared %d; want %d, %d (at most %d)", tc.k.Params, s.Block[0], s.SharedBytes, tc.block, tc.shared, c.MaxSharedBytes)
		}
	}
	both := wsKernel(gemmKernWGMMA("gemm", 64, 64, 3, 128))
	both.Params.SetFlag("wgmma", true)
	if err := kernels.Families[ir.GEMM].CheckParams(both.Params); err == nil {
		t.Error("wgmma with wgmma_ws: no error")
	}
}

// TestCompileWSCases compiles the warp-specialized tile's cases to PTX
// (clang-19, sm_90a: the asm operands and every instruction wsInstructions
// names), and holds that the tile is refused off CUDA (its render for gfx1151
// stops at wgmma's #error).
func TestCompileWSCases(t *testing.T) {
	c := clang(t)
	var srcs []hipcc.Source
	want := map[string][]string{}
	for _, gc := range wsGEMMCases {
		k := gc.k
		k.Name = gc.name
		s, err := Render(plan.SM90, k)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
		want[k.Name] = wsInstructions(k)
	}
	for _, fam := range []string{"moe_gate_up_group", "moe_down_group"} {
		k := wsKernel(kern(fam, termsParams(map[string]float64{"experts": 16, "hidden": 2048, "inter": 512, "k": 8}, 3)))
		k.Name = fam + "_ws"
		s, err := Render(plan.SM90, k)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
		want[k.Name] = wsInstructions(k)
		if h, err := Render(plan.GFX1151, k); err == nil && !strings.Contains(h.Code, "#error") {
			t.Errorf("%s renders for gfx1151 without wgmma's #error", k.Name)
		}
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), srcs, hipcc.Options{Flags: []string{"-Wunused-const-variable", "-Wunused-variable"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !bytes.Contains(r.Object, []byte(".entry "+r.Name)) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: no .entry in the PTX, or warnings:\n%s", r.Name, r.Log)
			continue
		}
		for _, ins := range want[r.Name] {
			if !bytes.Contains(r.Object, []byte(ins)) {
				t.Errorf("%s: no %s in the PTX", r.Name, ins)
			}
		}
	}
}
