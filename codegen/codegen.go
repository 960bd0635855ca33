// Package codegen renders the GPU source of every kernel of a plan: one
// template per op family (kernels/*.tmpl), written once against a small
// dialect-neutral vocabulary, specialized with the kernel's parameters as
// compile-time constants and preceded by a dialect prelude (HIP for gfx1151,
// CUDA for sm_90). Sources are self-contained: no headers, no device
// libraries, so they compile with `clang -nogpulib -nogpuinc` (HIP) and with
// either nvcc or `clang -nocudainc -nocudalib` (CUDA).
//
// # Kernel ABI
//
// The sources implement kernel ABI plan.KernelABI, and each Source says so
// (Source.ABI), so a bundle records the ABI its code objects speak and an
// engine of another ABI refuses it. Each rendered source defines exactly one
// entry point,
//
//	extern "C" __global__ void <kernel name>(<operands>, int n, const int* params)
//
// named after plan.Kernel.Name. Its arguments are:
//
//   - one pointer per operand of the family's ir.Catalogue signature, in
//     catalogue order: f32 operands are float*, bf16 operands const
//     unsigned short* (BF16 bit patterns), i32 operands int*. The KV cache
//     operands (ir.AnyFloat) are float* or, when the kernel's dtype flag
//     is set (ir.AnyFloatIsBF16), unsigned short* written with
//     round-to-nearest-even. Every pointer is the
//     plan argument's buffer plus its byte offset and must be 16-byte
//     aligned, plan.ArgAlign (matmul, moe_gate_up, moe_down and attention
//     use 16-byte loads); the
//     frozen plans keep every offset and dynamic stride a multiple of 16;
//   - int n: the launch's logical row count (the runtime's rows; for a
//     kernel planned with a constant "rows" parameter, that constant). Rows
//     at or past n are never read into outputs nor written;
//   - const int* params: the device-resident parameter block (ir.Param*
//     slots, runtime.Params), passed to every kernel. Dynamic scalars such
//     as "pos" (rope, kv_append, attention) are read from it at run time,
//     never passed by value, so a captured decode graph stays valid as they
//     change.
//
// Every kernel is launched with the plan's grid and a block of Threads
// threads (planner/grid.go); the per-family grid is documented at the top of
// each template. No dynamic shared memory is used.
//
// # Tests
//
// Golden sources of one kernel per family and dialect live in
// testdata/golden (go test ./codegen -update). Every kernel of the frozen
// gfx1151 plan is compiled to a code object by clang-19 through package
// hipcc and held to its budgets (no scratch, ≤ 256 VGPRs, ≤ 64 KiB LDS);
// every sm_90 kernel is compiled to PTX by clang's CUDA front end. On a
// machine with an NVIDIA GPU, testdata/gpucheck.py runs differential cases
// written by `go test ./codegen -run WriteGPUCases -gpucases DIR` against
// the Go reference kernels (testdata/gpucheck_sm90.json: the last H200 run).
package codegen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Threads is the block size every template is written for; it must equal
// the planner's block (a test checks the frozen plans).
const Threads = 256

// Dialect is a GPU source language.
type Dialect string

const (
	HIP  Dialect = "hip"  // gfx1151 (RDNA 3.5, wave32), compiled by clang/hipcc
	CUDA Dialect = "cuda" // sm_90, compiled by nvcc (or parsed by clang)
)

// Ext is the source file extension of the dialect.
func (d Dialect) Ext() string {
	if d == CUDA {
		return ".cu"
	}
	return ".hip"
}

// DialectFor maps a plan target to the dialect its kernels are written in,
// so callers never hard-code the target list.
func DialectFor(target string) (Dialect, error) {
	switch target {
	case "gfx1151":
		return HIP, nil
	case "sm_90":
		return CUDA, nil
	}
	return "", fmt.Errorf("codegen: target %q has no GPU dialect", target)
}

// Source is one rendered kernel.
type Source struct {
	Kernel   string // plan kernel name, also the entry point's name
	Family   string
	Template string // the family template's file name
	ABI      int    // the kernel ABI the code implements (plan.KernelABI)
	Code     string
	Hash     string // "sha256:" + hex of Code
}

var (
	parseOnce sync.Once
	tmpl      *template.Template
	parseErr  error
)

// templates parses the embedded template set once: every family template
// and the common helpers share one namespace of {{define}}s.
func templates() (*template.Template, error) {
	parseOnce.Do(func() {
		tmpl, parseErr = template.New("kernels").Option("missingkey=error").ParseFS(kernels.Templates, "*.tmpl")
	})
	return tmpl, parseErr
}

// templateName is the file that holds a family's kernel.
func templateName(family string) string { return family + ".tmpl" }

// Render specializes the family template of k for dialect d; its why: each
// plan kernel becomes one self-contained source with its parameters folded in.
func Render(d Dialect, k plan.Kernel) (Source, error) {
	prelude, ok := preludes[d]
	if !ok {
		return Source{}, fmt.Errorf("codegen: unknown dialect %q", d)
	}
	sig, ok := ir.Catalogue[ir.Kind(k.Family)]
	if !ok {
		return Source{}, fmt.Errorf("codegen: kernel %s: unknown family %q", k.Name, k.Family)
	}
	if !isIdent(k.Name) {
		return Source{}, fmt.Errorf("codegen: kernel name %q is not a C identifier", k.Name)
	}
	for _, p := range sig.Params {
		if _, ok := k.Params[p]; !ok {
			return Source{}, fmt.Errorf("codegen: kernel %s: missing parameter %q", k.Name, p)
		}
	}
	t, err := templates()
	if err != nil {
		return Source{}, fmt.Errorf("codegen: templates: %w", err)
	}
	data, err := templateData(d, k, sig)
	if err != nil {
		return Source{}, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s: family %s, dialect %s. Generated by aimac codegen from %s; do not edit.\n",
		k.Name, k.Family, d, templateName(k.Family))
	b.WriteString(prelude)
	if err := t.ExecuteTemplate(&b, "common.tmpl", data); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: common: %w", k.Name, err)
	}
	if err := t.ExecuteTemplate(&b, templateName(k.Family), data); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	code := b.String()
	sum := sha256.Sum256([]byte(code))
	return Source{
		Kernel:   k.Name,
		Family:   k.Family,
		Template: templateName(k.Family),
		ABI:      plan.KernelABI,
		Code:     code,
		Hash:     "sha256:" + hex.EncodeToString(sum[:]),
	}, nil
}

// RenderPlan renders every kernel of a GPU plan, in the plan's order, so a
// build step gets all sources of a target in one call.
func RenderPlan(p *plan.Plan) ([]Source, error) {
	d, err := DialectFor(p.Target)
	if err != nil {
		return nil, err
	}
	out := make([]Source, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		s, err := Render(d, k)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// realParams are written as float literals; every other parameter is an
// integer extent (or the one_plus flag).
var realParams = map[string]bool{"eps": true, "scale": true, "theta": true}

// templateData is what a template sees: every parameter under its own name
// as a C literal (integers as integers, reals as exact float32 hex
// literals), the kernel's name and signature, and family-specific tables.
func templateData(d Dialect, k plan.Kernel, sig ir.Signature) (map[string]any, error) {
	data := map[string]any{}
	for name, v := range k.Params {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("codegen: kernel %s: parameter %s is %g", k.Name, name, v)
		}
		if realParams[name] {
			data[name] = floatLit(v)
			continue
		}
		if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
			return nil, fmt.Errorf("codegen: kernel %s: parameter %s is %g, want an integer", k.Name, name, v)
		}
		data[name] = int64(v)
	}
	data["name"] = k.Name
	data["dialect"] = string(d)
	data["threads"] = Threads
	data["args"] = signatureArgs(sig, ir.AnyFloatIsBF16(k.Params))
	var reads []string
	for _, dyn := range sig.Dyn {
		slot, ok := ir.ParamSlot[dyn]
		if !ok {
			return nil, fmt.Errorf("codegen: kernel %s: dynamic scalar %q has no parameter block slot", k.Name, dyn)
		}
		reads = append(reads, fmt.Sprintf("const int %s = params[%d];", dyn, slot))
	}
	data["params"] = strings.Join(reads, " ")
	if ir.Kind(k.Family) == ir.RoPE {
		inv := ropeInvFreq(int(k.Params["rot_dim"]), k.Params["theta"])
		lits := make([]string, len(inv))
		for i, f := range inv {
			lits[i] = floatLit(float64(f))
		}
		data["inv_freq"] = strings.Join(lits, ", ")
	}
	return data, nil
}

// signatureArgs spells the ABI's parameter list (see the package doc).
func signatureArgs(sig ir.Signature, kvBF16 bool) string {
	var parts []string
	for _, o := range sig.Operands {
		var typ string
		switch o.DType {
		case ir.F32:
			typ = "float*"
		case ir.BF16:
			typ = "const bf16*"
		case ir.I32:
			typ = "int*"
		case ir.AnyFloat:
			typ = "float*"
			if kvBF16 {
				typ = "bf16*"
			}
		}
		if o.Access == ir.Read && o.DType == ir.F32 {
			typ = "const float*"
		}
		if o.Access == ir.Read && o.DType == ir.I32 {
			typ = "const int*"
		}
		if o.Access == ir.Read && o.DType == ir.AnyFloat {
			typ = "const " + typ
		}
		parts = append(parts, typ+" "+o.Name)
	}
	parts = append(parts, "int n", "const int* params")
	return strings.Join(parts, ", ")
}

// floatLit writes v rounded to float32 as an exact hexadecimal float
// literal, so the kernel uses bit for bit the float32 the reference uses.
func floatLit(v float64) string {
	f := float32(v)
	if f == 0 {
		return "0.0f"
	}
	return strconv.FormatFloat(float64(f), 'x', -1, 32) + "f"
}

// ropeInvFreq is kernels' inverse-frequency table (1/theta^(2j/rot) in
// float32 steps, as torch computes it), folded into the RoPE source so the
// device never evaluates pow.
func ropeInvFreq(rotDim int, theta float64) []float32 {
	base := float64(float32(theta))
	inv := make([]float32, rotDim/2)
	for j := range inv {
		exponent := float32(2*j) / float32(rotDim)
		power := float32(math.Pow(base, float64(exponent)))
		inv[j] = 1 / power
	}
	return inv
}

// isIdent reports whether s can name a C function.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
