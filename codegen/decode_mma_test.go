package codegen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// mmaKernel is an attention_decode_mma kernel (bf16 KV) with the
// planner's block heads and target t's warps and stages
// (kernels.DecodeMMAGeometry).
func mmaKernel(t plan.Target, hq, hkv, d, capacity, splits, align int) plan.Kernel {
	return mmaFamilyKernel("attention_decode_mma", t, hq, hkv, d, capacity, splits, align)
}

// mmaGateKernel is the attention_decode_mma_gate kernel of the same shape.
func mmaGateKernel(t plan.Target, hq, hkv, d, capacity, splits, align int) plan.Kernel {
	return mmaFamilyKernel("attention_decode_mma_gate", t, hq, hkv, d, capacity, splits, align)
}

func mmaFamilyKernel(family string, t plan.Target, hq, hkv, d, capacity, splits, align int) plan.Kernel {
	warps, stages, ok := kernels.DecodeMMAGeometry(t.Launch(), d)
	if !ok {
		panic(fmt.Sprintf("no attention_decode_mma geometry for head_dim %d on %s", d, t))
	}
	return kern(family, map[string]float64{"q_heads": float64(hq), "kv_heads": float64(hkv),
		"head_dim": float64(d), "scale": 1 / math.Sqrt(float64(d)), "capacity": float64(capacity), "width": float64(hkv * d),
		"kv_bf16": 1, "splits": float64(splits), "split_align": float64(align), "block_heads": float64(kernels.MMABlockHeads(hq / hkv)),
		"warps": float64(warps), "ring_stages": float64(stages)})
}

// mmaCase is one correctness case of attention_decode_mma: heads, a
// context of ctx positions for the last of rows query rows (pos = ctx −
// rows), splits and their alignment, sharp (scale 2: scores spread over
// tens, so the running max moves often).
type mmaCase struct {
	name                    string
	gate                    bool // attention_decode_mma_gate
	hq, hkv, d, ctx, rows   int
	capacity, splits, align int
	sharp                   bool
}

// mmaCases: the real model's heads (16 query, 2 KV, 256 dims) with sm_90's
// 66 splits at contexts 1, 2, 17, 255, 257, at a split boundary (66 × 32
// and one past it: every split full, then the alignment doubling the
// chunk), a long context over 3 splits (many ring turns per warp), several
// rows, the capacity's last position; the tiny fixtures' heads (4, 2, 32:
// two heads of a KV head padded to the product's 8 columns) at the same
// edges; a group of 3 (6, 2, 64), one head per KV head of 128 dims, a group
// of 16 over one KV head (two blocks of 8), head dim 16 (two 16-byte
// chunks a row), sharp scores at the real and the tiny heads.
var mmaCases = []mmaCase{
	{"dmma_ctx1", false, 16, 2, 256, 1, 1, 300, 66, 32, false},
	{"dmma_ctx2", false, 16, 2, 256, 2, 1, 300, 66, 32, false},
	{"dmma_ctx17", false, 16, 2, 256, 17, 1, 300, 66, 32, false},
	{"dmma_ctx255", false, 16, 2, 256, 255, 1, 300, 66, 32, false},
	{"dmma_ctx257", false, 16, 2, 256, 257, 1, 300, 66, 32, false},
	{"dmma_boundary", false, 16, 2, 256, 66 * 32, 1, 2200, 66, 32, false},
	{"dmma_boundary1", false, 16, 2, 256, 66*32 + 1, 1, 2200, 66, 32, false},
	{"dmma_long", false, 16, 2, 256, 2100, 1, 2100, 3, 32, false},
	{"dmma_rows", false, 16, 2, 256, 203, 3, 300, 5, 4, false},
	{"dmma_full", false, 16, 2, 256, 300, 1, 300, 132, 1, false},
	{"dmma_tiny_ctx1", false, 4, 2, 32, 1, 1, 96, 66, 32, false},
	{"dmma_tiny_ctx2", false, 4, 2, 32, 2, 1, 96, 66, 32, false},
	{"dmma_tiny_ctx17", false, 4, 2, 32, 17, 1, 300, 66, 32, false},
	{"dmma_tiny_ctx255", false, 4, 2, 32, 255, 1, 300, 66, 32, false},
	{"dmma_tiny_ctx257", false, 4, 2, 32, 257, 1, 300, 3, 1, false},
	{"dmma_tiny_rows", false, 4, 2, 32, 95, 2, 96, 3, 1, false},
	{"dmma_group3", false, 6, 2, 64, 42, 2, 80, 9, 1, false},
	{"dmma_mha", false, 2, 2, 128, 64, 1, 64, 4, 8, false},
	{"dmma_group16", false, 16, 1, 64, 130, 1, 200, 2, 16, false},
	{"dmma_d16", false, 4, 1, 16, 77, 1, 100, 2, 1, false},
	{"dmma_sharp", false, 16, 2, 256, 2100, 1, 2100, 3, 32, true},
	{"dmma_sharp_tiny", false, 4, 2, 32, 1197, 2, 1200, 2, 1, true},
	// The combine folded in: 66 splits (8 mergers, one head each) at
	// contexts 1 (65 neutral splits arrive too), 257 and past a split
	// boundary; 3 splits (3 mergers, several heads each); several rows
	// (their own counters); the tiny heads (2 mergers); two blocks per KV
	// head (group 16); head dim 16; sharp scores.
	{"dmmag_ctx1", true, 16, 2, 256, 1, 1, 300, 66, 32, false},
	{"dmmag_ctx257", true, 16, 2, 256, 257, 1, 300, 66, 32, false},
	{"dmmag_boundary1", true, 16, 2, 256, 66*32 + 1, 1, 2200, 66, 32, false},
	{"dmmag_long", true, 16, 2, 256, 2100, 1, 2100, 3, 32, false},
	{"dmmag_rows", true, 16, 2, 256, 203, 3, 300, 5, 4, false},
	{"dmmag_tiny", true, 4, 2, 32, 70, 1, 96, 66, 32, false},
	{"dmmag_tiny_rows", true, 4, 2, 32, 95, 2, 96, 3, 1, false},
	{"dmmag_group16", true, 16, 1, 64, 130, 1, 200, 2, 16, false},
	{"dmmag_d16", true, 4, 1, 16, 77, 1, 100, 2, 1, false},
	{"dmmag_sharp", true, 16, 2, 256, 2100, 1, 2100, 3, 32, true},
	// The merge's scratch: its warps' sums (16-byte vectors) sat after
	// the splits' weights and faulted (misaligned address) wherever the
	// splits were not a multiple of four; one split (one merger, every
	// head), four (aligned either way), a group of 3 over 7 splits (3
	// mergers, odd weights), one head per KV head over 4.
	{"dmmag_splits1", true, 16, 2, 256, 257, 1, 300, 1, 32, false},
	{"dmmag_splits4", true, 16, 2, 256, 257, 1, 300, 4, 32, false},
	{"dmmag_group3_s7", true, 6, 2, 64, 42, 2, 80, 7, 1, false},
	{"dmmag_mha", true, 2, 2, 128, 64, 1, 64, 4, 8, false},
}

func (c mmaCase) kernel(t plan.Target) plan.Kernel {
	k := mmaKernel(t, c.hq, c.hkv, c.d, c.capacity, c.splits, c.align)
	if c.gate {
		k = mmaGateKernel(t, c.hq, c.hkv, c.d, c.capacity, c.splits, c.align)
	}
	if c.sharp {
		k = sharp(k)
	}
	return k
}

func (c mmaCase) gpuCase() gpuCase {
	return gpuCase{c.name, c.kernel(plan.SM90), c.rows, c.ctx - c.rows}
}

// mmaSpeed is one speed case at the real model's heads: family at a
// context of ctx positions (pos = ctx − 1) with splits splits, its
// operands held rotate times on the device (so that a cache smaller than
// the 50 MB L2 is timed from HBM).
type mmaSpeed struct {
	name         string
	family       string // attention_decode_mma or attention_decode_split
	ctx, splits  int
	reps, rotate int
}

// mmaSpeeds: the tensor-core split at 8K, 32K and 128K with sm_90's 66
// splits (one block per SM) and with 132 (two waves), the CUDA-core split
// (132 splits, today's plan) at the same contexts beside them, all bf16 KV.
// The 8K caches (16.8 MB) rotate over four copies, 32K over two.
var mmaSpeeds = []mmaSpeed{
	{"dmma_speed_8k", "attention_decode_mma", 8192, 66, 200, 4},
	{"dmma_speed_32k", "attention_decode_mma", 32768, 66, 100, 2},
	{"dmma_speed_128k", "attention_decode_mma", 131072, 66, 40, 1},
	{"dmma_speed_8k_s132", "attention_decode_mma", 8192, 132, 200, 4},
	{"dmma_speed_32k_s132", "attention_decode_mma", 32768, 132, 100, 2},
	{"dmma_speed_128k_s132", "attention_decode_mma", 131072, 132, 40, 1},
	{"dmma_speed_1k", "attention_decode_mma", 1024, 66, 200, 32},
	{"dmmag_speed_8k", "attention_decode_mma_gate", 8192, 66, 200, 4},
	{"dmmag_speed_32k", "attention_decode_mma_gate", 32768, 66, 100, 2},
	{"dmmag_speed_128k", "attention_decode_mma_gate", 131072, 66, 40, 1},
	{"dmmag_speed_1k", "attention_decode_mma_gate", 1024, 66, 200, 32},
	{"dmma_split_speed_8k", "attention_decode_split", 8192, 132, 200, 4},
	{"dmma_split_speed_32k", "attention_decode_split", 32768, 132, 100, 2},
	{"dmma_split_speed_128k", "attention_decode_split", 131072, 132, 40, 1},
}

// TestWriteGPUCasesDecodeMMA writes attention_decode_mma's correctness
// cases (mmaCases, outputs poisoned) and, with -gpucases, its speed cases
// (mmaSpeeds, bytes: K and V of every position, q, and the records of the
// splits that got positions).
func TestWriteGPUCasesDecodeMMA(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range mmaCases {
		writeCase(t, filepath.Join(out, c.name), c.gpuCase(), uint64(3000+i))
	}
	if *gpuCases == "" {
		return
	}
	const hq, hkv, d = 16, 2, 256
	for i, sp := range mmaSpeeds {
		active := 0
		for s := range sp.splits {
			if lo, hi := kernels.SplitRange(sp.ctx, sp.splits, 32, s); lo < hi {
				active++
			}
		}
		kv := 2 * int64(sp.ctx) * hkv * d * 2
		bytes := kv + hq*d*4 + int64(hq*active*kernels.PartialStride(d)*4)
		var k plan.Kernel
		switch sp.family {
		case "attention_decode_mma":
			k = mmaKernel(plan.SM90, hq, hkv, d, sp.ctx, sp.splits, 32)
		case "attention_decode_mma_gate":
			k = mmaGateKernel(plan.SM90, hq, hkv, d, sp.ctx, sp.splits, 32)
			bytes += 3 * hq * d * 4 // the gates read, out written (the records stay in L2)
		default:
			k = splitKernel(hq, hkv, d, sp.ctx, sp.splits, 32, true)
		}
		note := fmt.Sprintf("%s of a %d-position context, bf16 KV, %d splits, %d copies of the operands (the caches repeat every %d positions)",
			sp.family, sp.ctx, sp.splits, sp.rotate, speedPeriod)
		period := min(speedPeriod, sp.ctx)
		writeCaseFull(t, filepath.Join(out, sp.name), gpuCase{sp.name, k, 1, sp.ctx - 1}, uint64(4000+i), period,
			&caseSpeed{reps: sp.reps, rotate: sp.rotate, bytes: bytes, note: note})
	}
}

// TestDecodeMMACasesMeta checks what the device runner reads of a case:
// the launch of sm_90's geometry (4 warps, 3 stages, 208 KiB of dynamic
// shared memory at 256 dims) and the records' operand.
func TestDecodeMMACasesMeta(t *testing.T) {
	dir := t.TempDir()
	c := mmaCases[0].gpuCase()
	writeCase(t, dir, c, 1)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta caseMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Block[0] != 128 || meta.Shared != (4*3*2*16*256+2*16*256)*2 || len(meta.Grid) != 3 || meta.Grid[0] != 66 || meta.Grid[1] != 2 {
		t.Errorf("launch: block %v, shared %d, grid %v", meta.Block, meta.Shared, meta.Grid)
	}
	if meta.Args[0].File != "partial.in" || !meta.Args[0].Out || meta.Args[2].DType != string(ir.BF16) {
		t.Errorf("args: %+v", meta.Args)
	}
}

// compiledMMACases are the cases whose shapes differ in more than their
// splits and contexts (which only change constants): the real heads, the
// tiny fixtures', a group of 3, one head per KV head, a group of 16, 16
// dims, each split and fused.
var compiledMMACases = map[string]bool{"dmma_ctx1": true, "dmma_tiny_ctx1": true, "dmma_group3": true, "dmma_mha": true,
	"dmma_group16": true, "dmma_d16": true, "dmmag_ctx1": true, "dmmag_tiny": true, "dmmag_d16": true,
	"dmmag_group3_s7": true, "dmmag_mha": true}

// TestCompileDecodeMMA compiles the attention_decode_mma kernels of
// compiledMMACases for gfx1151 (WMMA, its own geometry: 2 warps, one stage
// within 64 KiB of LDS) and to PTX for sm_90: no scratch, VGPRs and LDS
// within budget, no warnings, no local memory.
func TestCompileDecodeMMA(t *testing.T) {
	c := clang(t)
	seen := map[string]bool{}
	var hip, cuda []hipcc.Source
	for i, mc := range mmaCases {
		if !compiledMMACases[mc.name] {
			continue
		}
		for _, target := range plan.GPUTargets() {
			k := mc.kernel(target)
			k.Name = fmt.Sprintf("%s_%d", k.Family, i)
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
		if strings.Contains(string(r.Object), ".local") {
			t.Errorf("%s: PTX with local memory", r.Name)
		}
	}
	if len(results) == 0 || len(ptx) == 0 {
		t.Fatal("nothing compiled")
	}
}

// TestCompiledMMACasesExist keeps compiledMMACases naming real cases.
func TestCompiledMMACasesExist(t *testing.T) {
	n := 0
	for _, c := range mmaCases {
		if compiledMMACases[c.name] {
			n++
		}
	}
	if n != len(compiledMMACases) {
		t.Errorf("%d of the %d compiled case names are cases", n, len(compiledMMACases))
	}
}
