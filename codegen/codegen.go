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
// Each rendered source defines exactly one entry point,
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
//     aligned (matmul, moe_gate_up, moe_down and attention use 16-byte loads); the
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
	"encoding/json"
	"fmt"
	"sort"
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

// Render specializes the family template of k for dialect d; its why: each
// plan kernel becomes one self-contained source with its parameters folded in.
func Render(d Dialect, k plan.Kernel) (Source, error) {
	prelude, ok := preludes[d]
	if !ok {
		return Source{}, fmt.Errorf("codegen: unknown dialect %q", d)
	}
	f, err := kernels.Families.Family(ir.Kind(k.Family))
	if err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	if !isIdent(k.Name) {
		return Source{}, fmt.Errorf("codegen: kernel name %q is not a C identifier", k.Name)
	}
	if err := f.CheckParams(k.Params); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	t, err := templates()
	if err != nil {
		return Source{}, fmt.Errorf("codegen: templates: %w", err)
	}
	data, err := templateData(d, k, f)
	if err != nil {
		return Source{}, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// %s: family %s, dialect %s. Generated by aimac codegen from %s; do not edit.\n",
		k.Name, k.Family, d, f.Template)
	b.WriteString(prelude)
	if err := t.ExecuteTemplate(&b, "common.tmpl", data); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: common: %w", k.Name, err)
	}
	if err := t.ExecuteTemplate(&b, f.Template, data); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	code := b.String()
	sum := sha256.Sum256([]byte(code))
	return Source{
		Kernel:   k.Name,
		Family:   k.Family,
		Template: f.Template,
		Code:     code,
		Hash:     "sha256:" + hex.EncodeToString(sum[:]),
	}, nil
}

// RenderPlan renders every kernel of a GPU plan, in the plan's order, so a
// build step gets all sources of a target in one call.
func RenderPlan(p *plan.Plan) ([]Source, error) {
	d, err := p.Target.Dialect()
	if err != nil {
		return nil, fmt.Errorf("codegen: %w", err)
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

// templateData is what a template sees: every parameter under its own name
// as a C literal by its declared type (integers as integers, reals as exact
// float32 hex literals, flags as booleans for {{if}}), the kernel's name and
// signature, the reads of the slots it declares, and the family's own
// template data (a []float32 as a list of float32 literals).
func templateData(d Dialect, k plan.Kernel, f *ir.Family) (map[string]any, error) {
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
	data["name"] = k.Name
	data["dialect"] = string(d)
	data["threads"] = Threads
	data["args"] = signatureArgs(f, f.AnyFloatIsBF16(k.Params))
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

// ManifestKernel is one kernel's entry in the manifest.
type ManifestKernel struct {
	Name       string    `json:"name"`
	Family     string    `json:"family"`
	Template   string    `json:"template"`
	Params     ir.Params `json:"params"`
	SourceHash string    `json:"source_hash"`
}

// Manifest lists a target's rendered kernels; the build writes it next to
// the code objects so the runtime can check it loads what the plan names.
type Manifest struct {
	Target  plan.Target      `json:"target"`
	Kernels []ManifestKernel `json:"kernels"`
}

// NewManifest renders every kernel of p and records its source hash, so the
// manifest is always derived from the same sources the compiler sees.
func NewManifest(p *plan.Plan) (*Manifest, error) {
	srcs, err := RenderPlan(p)
	if err != nil {
		return nil, err
	}
	m := &Manifest{Target: p.Target, Kernels: make([]ManifestKernel, 0, len(srcs))}
	for i, s := range srcs {
		m.Kernels = append(m.Kernels, ManifestKernel{
			Name: s.Kernel, Family: s.Family, Template: s.Template,
			Params: p.Kernels[i].Params, SourceHash: s.Hash,
		})
	}
	sort.Slice(m.Kernels, func(i, j int) bool { return m.Kernels[i].Name < m.Kernels[j].Name })
	return m, nil
}

// Bytes is the manifest's canonical JSON: kernels sorted by name, map keys
// sorted (encoding/json), two-space indent, trailing newline.
func (m *Manifest) Bytes() ([]byte, error) {
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
