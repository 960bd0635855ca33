// Package codegen renders the GPU source of every kernel of a plan: one
// template per kernel family (the family's Template in kernels.Families,
// kernels/*.tmpl), written once against a small dialect-neutral vocabulary,
// specialized with the kernel's typed parameters as compile-time constants
// (integers as integers, reals as exact float32 hex literals, flags as
// booleans for {{if}}), the family's own template data (rope's inverse
// frequencies) and preceded by the prelude of the target's dialect (HIP for
// gfx1151, CUDA for sm_90) with the target's launch configuration (block
// threads, warp size; plan.TargetSpec). Sources are self-contained: no
// headers, no device libraries, so they compile with `clang -nogpulib
// -nogpuinc` (HIP) and with either nvcc or `clang -nocudainc -nocudalib`
// (CUDA).
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
//   - one pointer per operand of the family's declaration
//     (kernels.Families), in declaration order: f32 operands are float*,
//     bf16 operands const unsigned short* (BF16 bit patterns), i32 operands
//     int*. AnyFloat operands (the KV cache) are float* or, when the
//     family's dtype flag is set (ir.Family.AnyFloatFlag), unsigned short*
//     written with round-to-nearest-even. Every pointer is the plan
//     argument's buffer plus its byte offset and must be 16-byte aligned
//     (plan.ArgAlign; matmul, matmul_add, moe_gate_up, moe_down and
//     attention use 16-byte loads); the frozen plans keep every offset and
//     dynamic stride a multiple of 16;
//   - int n: the launch's logical row count (the runtime's rows; for a
//     kernel planned with a constant "rows" parameter, that constant). Rows
//     at or past n are never read into outputs nor written. A negative n
//     names the parameter slot that holds the count (slot −n−1): every
//     entry point starts with `if (n < 0) n = params[-n - 1];`, so a
//     launch captured into a graph (the prefill graphs) reads the segment's
//     length at run time;
//   - const int* params: the device-resident parameter block (ir.Slot
//     indices, runtime.Params), passed to every kernel. The slots a family
//     declares (ir.Family.Slots: "pos" for rope, kv_append and attention,
//     the sampling and fill slots) are read from it at run time as
//     `const int <slot name> = params[<slot>];`, never passed by value, so a
//     captured decode graph stays valid as they change.
//
// Every kernel is launched with the plan's grid and block, which the
// planner's configure pass takes from the family's launch rule and the
// target's launch configuration; the per-family grid is documented at the
// top of each template. No dynamic shared memory is used yet.
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
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Dialect is a GPU source language; a plan target knows its own
// (plan.Target.Dialect).
type Dialect = plan.Dialect

const (
	HIP  = plan.HIP  // gfx1151 (RDNA 3.5, wave32), compiled by clang/hipcc
	CUDA = plan.CUDA // sm_90, compiled by nvcc (or parsed by clang)
)

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

// Render specializes the family template of k for target t: each plan
// kernel becomes one self-contained source in t's dialect with its
// parameters and t's launch configuration folded in. A decode_persistent
// kernel runs other kernels' entry points and renders with its plan
// (RenderPlan).
func Render(t plan.Target, k plan.Kernel) (Source, error) {
	if ir.Kind(k.Family) == ir.DecodePersistent {
		return Source{}, fmt.Errorf("codegen: kernel %s: a %s kernel renders with the plan that lists its members", k.Name, k.Family)
	}
	r, err := renderKernel(t, k)
	if err != nil {
		return Source{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: family %s, dialect %s. Generated by aimac codegen from %s; do not edit.\n",
		k.Name, k.Family, r.dialect, r.family.Template)
	b.WriteString(r.prelude)
	b.WriteString(r.body)
	return newSource(k, r.family.Template, b.String()), nil
}

// rendered is a kernel's source in two parts: the dialect's prelude and
// what follows it (the common helpers, the family's helpers, the entry
// point), which a decode_persistent kernel wraps in a namespace of its own.
type rendered struct {
	dialect Dialect
	prelude string
	body    string
	family  *ir.Family
}

func renderKernel(t plan.Target, k plan.Kernel) (rendered, error) {
	d, err := t.Dialect()
	if err != nil {
		return rendered{}, fmt.Errorf("codegen: %w", err)
	}
	c := t.Launch()
	prelude, err := prelude(d, c)
	if err != nil {
		return rendered{}, err
	}
	f, err := kernels.Families.Family(ir.Kind(k.Family))
	if err != nil {
		return rendered{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	if f.CUDAOnly && d != CUDA {
		return rendered{}, fmt.Errorf("codegen: kernel %s: family %s is CUDA (sm_90a) code; target %s renders %s", k.Name, k.Family, t, d)
	}
	if !isIdent(k.Name) {
		return rendered{}, fmt.Errorf("codegen: kernel name %q is not a C identifier", k.Name)
	}
	if err := f.CheckParams(k.Params); err != nil {
		return rendered{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	tm, err := templates()
	if err != nil {
		return rendered{}, fmt.Errorf("codegen: templates: %w", err)
	}
	data, err := templateData(d, c, k, f)
	if err != nil {
		return rendered{}, err
	}
	var b bytes.Buffer
	if err := tm.ExecuteTemplate(&b, "common.tmpl", data); err != nil {
		return rendered{}, fmt.Errorf("codegen: kernel %s: common: %w", k.Name, err)
	}
	var body bytes.Buffer
	if err := tm.ExecuteTemplate(&body, f.Template, data); err != nil {
		return rendered{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	kernel, err := pdlEntry(k.Name, body.String())
	if err != nil {
		return rendered{}, err
	}
	if kernel, err = rowsEntry(k.Name, kernel); err != nil {
		return rendered{}, err
	}
	b.WriteString(kernel)
	return rendered{dialect: d, prelude: prelude, body: b.String(), family: f}, nil
}

func newSource(k plan.Kernel, template, code string) Source {
	sum := sha256.Sum256([]byte(code))
	return Source{
		Kernel:   k.Name,
		Family:   k.Family,
		Template: template,
		ABI:      plan.KernelABI,
		Code:     code,
		Hash:     "sha256:" + hex.EncodeToString(sum[:]),
	}
}

// RenderPlan renders every kernel of a GPU plan, in the plan's order, so a
// build step gets all sources of a target in one call.
func RenderPlan(p *plan.Plan) ([]Source, error) {
	if _, err := p.Target.Dialect(); err != nil {
		return nil, fmt.Errorf("codegen: %w", err)
	}
	out := make([]Source, 0, len(p.Kernels))
	for _, k := range p.Kernels {
		var s Source
		var err error
		if ir.Kind(k.Family) == ir.DecodePersistent {
			s, err = RenderPersistent(p, k)
		} else {
			s, err = Render(p.Target, k)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// templateData is what a template sees: every parameter under its own name
// as a C literal by its declared type (integers as integers, reals as exact
// float32 hex literals, flags as booleans for {{if}}, an optional flag left
// out as false), the kernel's name and
// signature, the reads of the slots it declares, and the family's own
// template data (a []float32 as a list of float32 literals).
func templateData(d Dialect, c ir.LaunchConfig, k plan.Kernel, f *ir.Family) (map[string]any, error) {
	data := map[string]any{}
	for name, v := range k.Params.Ints {
		data[name] = v
	}
	for name, v := range k.Params.Reals {
		data[name] = floatLit(v)
	}
	for name, v := range k.Params.Flags {
		data[name] = v
	}
	for _, s := range f.Params {
		if _, given := data[s.Name]; s.Optional && !given {
			data[s.Name] = false // an optional flag left out
		}
	}
	// The names codegen itself sets: a parameter of the same name would be
	// overwritten silently (the template would see the target's value).
	for name, v := range map[string]any{"name": k.Name, "dialect": string(d), "threads": c.Threads, "warp": c.Warp,
		"stages": c.Stages, "args": signatureArgs(f, f.AnyFloatIsBF16(k.Params))} {
		if _, dup := data[name]; dup {
			return nil, fmt.Errorf("codegen: kernel %s: parameter %q shadows what codegen sets for the template", k.Name, name)
		}
		data[name] = v
	}
	// The launch's dynamic shared memory (the family's launch rule; rows do
	// not change it): a tile whose buffers depend on the budget reads them
	// back from it, so the rule lives in one place.
	if f.Launch != nil {
		if _, dup := data["shared_bytes"]; dup {
			return nil, fmt.Errorf("codegen: kernel %s: parameter %q shadows what codegen sets for the template", k.Name, "shared_bytes")
		}
		data["shared_bytes"] = f.Launch(k.Params, 1, c).SharedBytes
	}
	var reads []string
	for _, s := range f.Slots {
		if !s.Valid() {
			return nil, fmt.Errorf("codegen: kernel %s: slot %d is not a parameter block slot", k.Name, int(s))
		}
		reads = append(reads, fmt.Sprintf("const int %s = params[%d];", s, int(s)))
	}
	data["params"] = strings.Join(reads, " ")
	if f.TemplateData != nil {
		for name, v := range f.TemplateData(k.Params) {
			if _, dup := data[name]; dup {
				return nil, fmt.Errorf("codegen: kernel %s: template data %q shadows a parameter", k.Name, name)
			}
			if fs, ok := v.([]float32); ok {
				lits := make([]string, len(fs))
				for i, x := range fs {
					lits[i] = floatLit(float64(x))
				}
				v = strings.Join(lits, ", ")
			}
			data[name] = v
		}
	}
	return data, nil
}

// pdlEntry puts PDL_ENTRY() first in the entry point's body unless the
// entry point calls PDL_WAIT() itself (see the prelude): every kernel
// then waits for the launches before it before touching their results, so
// the decode step may launch them all with programmatic serialization.
func pdlEntry(name, text string) (string, error) {
	head := "KERNEL void " + name + "("
	at := strings.Index(text, head)
	if at < 0 {
		return "", fmt.Errorf("codegen: kernel %s: no %q in its template's text", name, head)
	}
	// Only the entry point's own text counts: helpers above it may spell the
	// macros for entry points that call them.
	if body := text[at:]; strings.Contains(body, "PDL_WAIT()") {
		if !strings.Contains(body, "PDL_TRIGGER()") {
			return "", fmt.Errorf("codegen: kernel %s: its entry point calls PDL_WAIT() but never PDL_TRIGGER()", name)
		}
		return text, nil
	}
	open := strings.IndexByte(text[at:], '{')
	if open < 0 {
		return "", fmt.Errorf("codegen: kernel %s: the entry point has no body", name)
	}
	open += at + 1
	return text[:open] + "\n  PDL_ENTRY();" + text[open:], nil
}

// rowsEntry makes the entry point's first statement read its row count
// from the parameter block when n is negative (slot −n−1; KernelABI 5): a
// launch captured into a prefill graph passes the slot instead of the count,
// so one graph of a bucket serves every segment length.
func rowsEntry(name, text string) (string, error) {
	at := strings.Index(text, "KERNEL void "+name+"(")
	if at < 0 {
		return "", fmt.Errorf("codegen: kernel %s: no entry point in its template's text", name)
	}
	open := strings.IndexByte(text[at:], '{')
	if open < 0 {
		return "", fmt.Errorf("codegen: kernel %s: the entry point has no body", name)
	}
	open += at + 1
	return text[:open] + "\n  if (n < 0) n = params[-n - 1];" + text[open:], nil
}

// signatureArgs spells the ABI's parameter list (see the package doc).
func signatureArgs(f *ir.Family, kvBF16 bool) string {
	var parts []string
	for _, o := range f.Operands {
		var typ string
		switch o.DType {
		case ir.F32:
			typ = "float*"
		case ir.BF16:
			typ = "const bf16*"
		case ir.I32:
			typ = "int*"
		case ir.I8:
			typ = "signed char*"
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
		if o.Access == ir.Read && o.DType == ir.I8 {
			typ = "const signed char*"
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
