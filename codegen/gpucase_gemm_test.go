package codegen

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// gemmKern is a tensor-core GEMM case kernel of the shape K → N.
func gemmKern(family string, k, n float64) plan.Kernel {
	return kern(family, map[string]float64{"k": k, "n": n})
}

// gemmCases are the tensor-core GEMM family's correctness cases: rows
// 1, 63, 65, 130 and 257 (a partial tile, one past a tile, several tiles), N
// and K odd multiples of 8 and not multiples of 8 at all (the one-element
// staging of W and A), K shorter than one k-tile, the tiny fixtures' shapes
// and the model's. The references round x to bf16 as the kernels stage it,
// so only the order of the fp32 sums differs: gpucheck's f32 tolerance
// (2e-4 + 1e-3·|want|) holds with a wide margin (K = 4096: ≈ 1e-5).
var gemmCases = []gpuCase{
	{"gemm_t1", gemmKern("gemm", 2048, 8192), 1, 0},
	{"gemm_t63", gemmKern("gemm", 2048, 264), 63, 0},
	{"gemm_t65", gemmKern("gemm", 2048, 264), 65, 0},
	{"gemm_t257", gemmKern("gemm", 4096, 2048), 257, 0},
	{"gemm_odd8", gemmKern("gemm", 2056, 136), 130, 0},
	{"gemm_kodd", gemmKern("gemm", 20, 7), 65, 0},
	{"gemm_kodd_wide", gemmKern("gemm", 1001, 300), 129, 0},
	{"gemm_kshort", gemmKern("gemm", 8, 24), 3, 0},
	{"gemm_tiny_qkv", gemmKern("gemm", 64, 192), 63, 0},
	{"gemm_tiny_down", gemmKern("gemm", 32, 64), 65, 0},
	{"gemm_add_t65", gemmKern("gemm_add", 4096, 2048), 65, 0},
	{"gemm_add_odd", gemmKern("gemm_add", 20, 7), 63, 0},
	{"gemm_add_tiny", gemmKern("gemm_add", 64, 64), 1, 0},
}

// TestCompileGEMMCases compiles every tensor-core case kernel for gfx1151
// (no scratch, LDS within budget, the WMMA instruction present) and to PTX
// (mma.sync, ldmatrix and cp.async present, no warning).
func TestCompileGEMMCases(t *testing.T) {
	c := clang(t)
	render := func(tg plan.Target) []hipcc.Source {
		var srcs []hipcc.Source
		for _, gc := range allTensorCases() {
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
	for _, gc := range allTensorCases() {
		if !strings.HasPrefix(gc.k.Family, "gemm") && !strings.HasSuffix(gc.k.Family, "_group") {
			continue
		}
		ins := []string{"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16"}
		if tensorK(gc.k)%8 == 0 {
			ins = append(ins, "cp.async.cg.shared.global")
		}
		tensorInstructions[gc.name] = ins
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), render(plan.SM90), hipcc.Options{})
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
	for _, r := range results {
		if r.Object == nil {
			t.Errorf("%s: no code object\n%s", r.Name, r.Log)
			continue
		}
		if why := r.Resources.Spills(); why != "" || r.Resources.ScratchBytes != 0 || r.Resources.LDSBytes > maxLDS {
			t.Errorf("%s: scratch %q (%d bytes), LDS %d", r.Name, why, r.Resources.ScratchBytes, r.Resources.LDSBytes)
		}
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
