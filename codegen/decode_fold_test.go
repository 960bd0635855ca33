package codegen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// foldKernel is family (attention_decode_mma_qk or attention_decode_split_qk)
// for target t with the planner's block heads (and, for the tensor-core
// split, t's warps and stages), the model's eps, theta and 1+w norms.
func foldKernel(family string, t plan.Target, hq, hkv, d, rot, capacity, splits, align int, bf16KV bool) plan.Kernel {
	var k plan.Kernel
	if family == string(ir.AttentionDecodeMMAQK) {
		k = mmaKernel(t, hq, hkv, d, capacity, splits, align)
	} else {
		k = splitKernel(hq, hkv, d, capacity, splits, align, bf16KV)
	}
	k.Family, k.Name = family, family+"_case"
	k.Params = k.Params.Clone()
	k.Params.SetInt("rot_dim", int64(rot))
	k.Params.SetReal("eps", 1e-6)
	k.Params.SetReal("theta", 1e7)
	k.Params.SetFlag("one_plus", true)
	k.Params.SetInt("new_rows", 1) // the decode step's one token
	return k
}

// foldCase is one correctness case of the folded families: heads, rotary
// dims, a context of ctx positions for the last of rows query rows (pos =
// ctx − rows), the cache's capacity, splits and their alignment.
type foldCase struct {
	name                    string
	family                  string
	bf16                    bool
	hq, hkv, d, rot         int
	ctx, rows               int
	capacity, splits, align int
}

func (c foldCase) kernel(t plan.Target) plan.Kernel {
	k := foldKernel(c.family, t, c.hq, c.hkv, c.d, c.rot, c.capacity, c.splits, c.align, c.bf16)
	k.Params.SetInt("new_rows", int64(c.rows))
	return k
}

func (c foldCase) gpuCase() gpuCase {
	return gpuCase{c.name, c.kernel(plan.SM90), c.rows, c.ctx - c.rows}
}

const (
	foldMMA   = string(ir.AttentionDecodeMMAQK)
	foldSplit = string(ir.AttentionDecodeSplitQK)
)

// foldCases: the tensor-core fold at the real model's heads (16 query, 2
// KV, 256 dims, rotary 64) with sm_90's 66 splits at contexts 1 (the new
// row alone), 2, 63, 64 and 65 (the new row last of split 1, alone in split
// 2), 1000, 8192 (the last of 64 full splits, the whole cache written), at
// the split boundary (66 × 32, every split full) and one past it (the
// chunk doubled: the new row first of its split), several rows (the later
// rows attend to the earlier rows' new positions, which they norm
// themselves) and two rows across a 16-position tile; the tiny fixtures'
// heads (4, 2, 32, rotary 8) at contexts 1, 70 and the capacity's last
// position, with rows; full rotary on a group of 3; one head per KV head;
// a group of 16 over one KV head (two blocks of 8: one stores the slot);
// head dim 16. Then the CUDA-core fold (gfx1151's 40 splits) with f32 and
// bf16 caches at the same kinds of edges. Every output is poisoned and
// every cache compared in full: the slot at the position included.
var foldCases = func() []foldCase {
	cs := []foldCase{
		{"qkf_mma_ctx1", foldMMA, true, 16, 2, 256, 64, 1, 1, 300, 66, 32},
		{"qkf_mma_ctx2", foldMMA, true, 16, 2, 256, 64, 2, 1, 300, 66, 32},
		{"qkf_mma_ctx63", foldMMA, true, 16, 2, 256, 64, 63, 1, 300, 66, 32},
		{"qkf_mma_ctx64", foldMMA, true, 16, 2, 256, 64, 64, 1, 300, 66, 32},
		{"qkf_mma_ctx65", foldMMA, true, 16, 2, 256, 64, 65, 1, 300, 66, 32},
		{"qkf_mma_ctx1000", foldMMA, true, 16, 2, 256, 64, 1000, 1, 1000, 66, 32},
		{"qkf_mma_ctx8192", foldMMA, true, 16, 2, 256, 64, 8192, 1, 8192, 66, 32},
		{"qkf_mma_boundary", foldMMA, true, 16, 2, 256, 64, 66 * 32, 1, 2200, 66, 32},
		{"qkf_mma_boundary1", foldMMA, true, 16, 2, 256, 64, 66*32 + 1, 1, 2200, 66, 32},
		{"qkf_mma_rows", foldMMA, true, 16, 2, 256, 64, 203, 3, 300, 5, 4},
		{"qkf_mma_rows_tile", foldMMA, true, 16, 2, 256, 64, 17, 2, 64, 1, 1},
		{"qkf_mma_tiny_ctx1", foldMMA, true, 4, 2, 32, 8, 1, 1, 96, 66, 32},
		{"qkf_mma_tiny_ctx70", foldMMA, true, 4, 2, 32, 8, 70, 1, 96, 66, 32},
		{"qkf_mma_tiny_last", foldMMA, true, 4, 2, 32, 8, 96, 2, 96, 3, 1},
		{"qkf_mma_group3", foldMMA, true, 6, 2, 64, 64, 42, 2, 80, 9, 1},
		{"qkf_mma_mha", foldMMA, true, 2, 2, 128, 64, 64, 1, 64, 4, 8},
		{"qkf_mma_group16", foldMMA, true, 16, 1, 64, 16, 130, 1, 200, 2, 16},
		{"qkf_mma_d16", foldMMA, true, 4, 1, 16, 8, 77, 1, 100, 2, 1},
	}
	for _, bf := range []bool{false, true} {
		sfx := map[bool]string{false: "", true: "_bf16"}[bf]
		cs = append(cs,
			foldCase{"qkf_split_ctx1" + sfx, foldSplit, bf, 16, 2, 256, 64, 1, 1, 300, 40, 32},
			foldCase{"qkf_split_ctx65" + sfx, foldSplit, bf, 16, 2, 256, 64, 65, 1, 300, 40, 32},
			foldCase{"qkf_split_ctx1000" + sfx, foldSplit, bf, 16, 2, 256, 64, 1000, 1, 1000, 40, 32},
			foldCase{"qkf_split_boundary1" + sfx, foldSplit, bf, 16, 2, 256, 64, 40*32 + 1, 1, 1300, 40, 32},
			foldCase{"qkf_split_rows" + sfx, foldSplit, bf, 16, 2, 256, 64, 203, 3, 300, 5, 4},
			foldCase{"qkf_split_tiny" + sfx, foldSplit, bf, 4, 2, 32, 8, 70, 1, 96, 40, 32},
			foldCase{"qkf_split_tiny_rows" + sfx, foldSplit, bf, 4, 2, 32, 8, 96, 2, 96, 3, 1},
			foldCase{"qkf_split_group3" + sfx, foldSplit, bf, 6, 2, 64, 64, 42, 2, 80, 9, 1},
			foldCase{"qkf_split_mha" + sfx, foldSplit, bf, 2, 2, 128, 64, 64, 1, 64, 4, 8},
		)
	}
	return cs
}()

// foldSpeed is one speed case at the real model's heads, bf16 KV, sm_90's
// 66 splits: kind "fold" (attention_decode_mma_qk), "mma" (the split it
// replaces) or "qknorm" (qk_norm_rope_append) at a context of ctx positions
// (pos = ctx − 1), its operands held rotate times on the device.
type foldSpeed struct {
	name         string
	kind         string
	ctx          int
	reps, rotate int
}

var foldSpeeds = []foldSpeed{
	{"qkf_speed_fold_8k", "fold", 8192, 200, 4},
	{"qkf_speed_fold_32k", "fold", 32768, 100, 2},
	{"qkf_speed_mma_8k", "mma", 8192, 200, 4},
	{"qkf_speed_mma_32k", "mma", 32768, 100, 2},
	{"qkf_speed_qknorm", "qknorm", 8192, 200, 1},
}

// foldChains time the fold against the two launches it replaces, back to
// back as the step launches them (with and without programmatic launch).
var foldChains = []struct {
	name    string
	members []string
	note    string
}{
	{"qkf_chain_old_8k", []string{"qkf_speed_qknorm", "qkf_speed_mma_8k"}, "qk_norm_rope_append then attention_decode_mma at 8K: the two launches the fold replaces"},
	{"qkf_chain_fold_8k", []string{"qkf_speed_fold_8k"}, "attention_decode_mma_qk at 8K, launch after launch"},
	{"qkf_chain_old_32k", []string{"qkf_speed_qknorm", "qkf_speed_mma_32k"}, "qk_norm_rope_append then attention_decode_mma at 32K"},
	{"qkf_chain_fold_32k", []string{"qkf_speed_fold_32k"}, "attention_decode_mma_qk at 32K, launch after launch"},
}

// TestWriteGPUCasesQKFold writes the folded families' correctness cases
// (foldCases) and, with -gpucases, the speed cases and chains (foldSpeeds,
// foldChains). Bytes: the split's (K and V of every position, q, the
// records of the splits that got positions), for the fold with qg's q
// halves and the new k and v rows instead of q; qk_norm_rope_append's
// reads of qg, k, v and writes of q and the cache row.
func TestWriteGPUCasesQKFold(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range foldCases {
		writeCase(t, filepath.Join(out, c.name), c.gpuCase(), uint64(6000+i))
	}
	if *gpuCases == "" {
		return
	}
	const hq, hkv, d, rot, splits = 16, 2, 256, 64, 66
	bytes := map[string]int64{}
	for i, sp := range foldSpeeds {
		active := 0
		for s := range splits {
			if lo, hi := kernels.SplitRange(sp.ctx, splits, 32, s); lo < hi {
				active++
			}
		}
		kv := 2 * int64(sp.ctx) * hkv * d * 2
		records := int64(hq * active * kernels.PartialStride(d) * 4)
		var c gpuCase
		var b int64
		var note string
		period := min(speedPeriod, sp.ctx)
		switch sp.kind {
		case "fold":
			c = gpuCase{sp.name, foldKernel(foldMMA, plan.SM90, hq, hkv, d, rot, sp.ctx, splits, 32, true), 1, sp.ctx - 1}
			b = kv + hq*d*4 + 2*hkv*d*4 + records
			note = fmt.Sprintf("attention_decode_mma_qk over %d positions, bf16 KV, 66 splits, %d copies", sp.ctx, sp.rotate)
		case "mma":
			c = gpuCase{sp.name, mmaKernel(plan.SM90, hq, hkv, d, sp.ctx, splits, 32), 1, sp.ctx - 1}
			b = kv + hq*d*4 + records
			note = fmt.Sprintf("attention_decode_mma over %d positions, bf16 KV, 66 splits, %d copies (what the fold replaces, with qk_norm_rope_append)", sp.ctx, sp.rotate)
		default:
			c = gpuCase{sp.name, qkNormKernel(hq, hkv, d, rot, 64, true), 1, 63}
			b = (2*hq*d+2*hkv*d+hq*d)*4 + 2*hkv*d*2
			note = "qk_norm_rope_append of one decode row (18 blocks): latency-bound"
			period = 0
		}
		writeCaseFull(t, filepath.Join(out, sp.name), c, uint64(6500+i), period,
			&caseSpeed{reps: sp.reps, rotate: sp.rotate, bytes: b, note: note})
		bytes[sp.name] = b
	}
	for _, c := range foldChains {
		m := chainMeta{Chain: c.members, Reps: 64, Note: c.note}
		for _, name := range c.members {
			if _, ok := bytes[name]; !ok {
				t.Fatalf("chain %s: no member case %s", c.name, name)
			}
			m.Bytes += bytes[name]
		}
		dir := filepath.Join(out, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := json.MarshalIndent(m, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// compiledFoldCases are the cases whose shapes differ in more than their
// splits and contexts (which only change constants).
var compiledFoldCases = map[string]bool{"qkf_mma_ctx1": true, "qkf_mma_tiny_ctx1": true, "qkf_mma_group3": true, "qkf_mma_mha": true,
	"qkf_mma_group16": true, "qkf_mma_d16": true, "qkf_split_ctx1": true, "qkf_split_ctx1_bf16": true, "qkf_split_tiny": true,
	"qkf_split_tiny_bf16": true, "qkf_split_group3_bf16": true, "qkf_split_mha": true}

// TestCompileQKFold compiles the folded kernels of compiledFoldCases for
// gfx1151 (the tensor-core fold in its WMMA geometry) and to PTX for sm_90:
// no scratch, VGPRs and LDS within budget, no warnings, no local memory.
func TestCompileQKFold(t *testing.T) {
	c := clang(t)
	var hip, cuda []hipcc.Source
	n := 0
	for i, fc := range foldCases {
		if !compiledFoldCases[fc.name] {
			continue
		}
		n++
		for _, target := range plan.GPUTargets() {
			k := fc.kernel(target)
			k.Name = fmt.Sprintf("%s_%d", k.Family, i)
			s, err := Render(target, k)
			if err != nil {
				t.Fatal(err)
			}
			if target == plan.GFX1151 {
				hip = append(hip, hipcc.Source{Name: k.Name, Code: s.Code})
			} else {
				cuda = append(cuda, hipcc.Source{Name: k.Name, Code: s.Code})
			}
		}
	}
	if n != len(compiledFoldCases) {
		t.Fatalf("%d of the %d compiled case names are cases", n, len(compiledFoldCases))
	}
	// Unused constants too: the device's nvcc builds with every warning an
	// error, and an unused constexpr (#177-D) failed the fold's first check.
	// (-Wextra on sm_90's render alone: mma.tmpl's WMMA helpers leave
	// parameters unused, which the HIP build does not treat as errors.)
	strict := hipcc.Options{Flags: []string{"-Wall", "-Wextra", "-Wunused-const-variable"}}
	results, err := c.Compile(context.Background(), hipcc.GFX1151, hip, hipcc.Options{Flags: []string{"-Wall", "-Wunused-const-variable"}})
	if err != nil {
		t.Error(err)
	}
	for _, r := range results {
		res := r.Resources
		t.Logf("%-32s vgpr %3d lds %6d scratch %d", r.Name, res.VGPRs, res.LDSBytes, res.ScratchBytes)
		if why := res.Spills(); why != "" || res.ScratchBytes != 0 || res.VGPRs == 0 || res.VGPRs > maxVGPRs || res.LDSBytes > maxLDS {
			t.Errorf("%s: %+v %s", r.Name, res, why)
		}
		if strings.Contains(r.Log, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", r.Name, r.Log)
		}
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), cuda, strict)
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
