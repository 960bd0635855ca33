package codegen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// normRCase is an rmsnorm_lm_head_int8 case compared bit for bit ("exact"):
// its r (div_nocall and rsqrt_nocall, the folded norm's rsqrt without the
// IEEE slow paths' calls) must be rsqrtf_ref's float, which the normed row
// xn shows. The activations are multiples of 2^e / 4 up to 16 · 2^e, so
// their squares and the sum of squares are exact in any order (the device
// sums in its lanes' order, the reference in order); every row's scale is
// +Inf, so every bound is ±Inf on both sides whatever the order of the
// dots and the contraction of the bound's arithmetic.
type normRCase struct {
	name     string
	k, n     int
	rpw, u   int
	exponent int // the activations' scale 2^exponent
}

var normRCases = []normRCase{
	{"lmhead_norm_r_real", 2048, 64, 4, 4, 0},         // the real width: the staged stream, a power-of-two mean
	{"lmhead_norm_r_small", 2048, 64, 4, 4, -12},      // eps weighs in the sum under the root
	{"lmhead_norm_r_large", 2048, 64, 4, 4, 40},       // mean near 2^80
	{"lmhead_norm_r_odd", 37, 40, 1, 1, 0},            // a true division by K, the per-element stream
	{"lmhead_norm_r_krem", 2064 + 8, 33, 2, 1, -3},    // K % 16 ≠ 0 at the real size's scale
	{"lmhead_norm_r_subnormal", 2048, 64, 4, 4, -140}, // subnormal activations: squares 0, r = 1/sqrt(eps), xn subnormal
}

// TestWriteGPUCasesNormR writes normRCases (inputs, reference outputs and
// meta.json with "exact").
func TestWriteGPUCasesNormR(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range normRCases {
		r := rand.New(rand.NewPCG(uint64(900+i), 3))
		k := kern("rmsnorm_lm_head_int8", map[string]float64{"k": float64(c.k), "n": float64(c.n), "group": float64(8 * c.rpw),
			"rows_per_warp": float64(c.rpw), "unroll": float64(c.u), "eps": 1e-6, "one_plus": 1})
		k.Name = "rmsnorm_lm_head_int8_case"
		var block [ir.ParamSlots]int32
		a := headArgs(k, &block)
		x, w := make([]float32, c.k), make([]float32, c.k)
		for j := range x {
			x[j] = float32(math.Ldexp(float64(r.IntN(129)-64)/4, c.exponent))
			w[j] = float32(r.NormFloat64() * 0.3)
		}
		q, scale := a.I8("q"), a.F32("scale")
		for j := range q {
			q[j] = int8(r.IntN(255) - 127)
		}
		for j := range scale {
			scale[j] = float32(math.Inf(1))
		}
		set(a, "x", f32Raw(x))
		set(a, "norm_w", f32Raw(w))
		in := snapshot(a)
		if err := a.Check(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := a.Family.Reference(a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, v := range a.F32("upper")[:c.n] {
			if !math.IsInf(float64(v), 1) {
				t.Fatalf("%s: an upper bound %v with every scale +Inf", c.name, v)
			}
		}
		dir := filepath.Join(out, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := struct {
			caseMeta
			Exact bool `json:"exact"`
		}{caseMeta{Kernel: k.Name, Grid: caseGrid(k, 1), Block: caseBlock(), N: 1, Params: block,
			Note: fmt.Sprintf("the folded norm's r bit for bit (xn) at K = %d, activations × 2^%d", c.k, c.exponent)}, true}
		for i, o := range a.Family.Operands {
			meta.Args = append(meta.Args, caseArg{File: o.Name + ".in", DType: string(o.DType), Out: o.Access != ir.Read})
			files := map[string][]byte{o.Name + ".in": in[o.Name]}
			if o.Access != ir.Read {
				files[o.Name+".want"] = a.Mem[i]
			}
			for name, b := range files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		src, err := Render(plan.SM90, k)
		if err != nil {
			t.Fatal(err)
		}
		mb, _ := json.MarshalIndent(meta, "", " ")
		for name, b := range map[string][]byte{"meta.json": mb, "kernel.cu": []byte(src.Code)} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
