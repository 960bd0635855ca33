package codegen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/plans"
)

var update = flag.Bool("update", false, "rewrite the golden sources under testdata/golden")

// frozen loads a frozen plan of the default model.
func frozen(t *testing.T, target plan.Target) *plan.Plan {
	t.Helper()
	b, err := plans.Frozen(target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// representatives picks one kernel per family from the gfx1151 plan (the
// first by name), the set the golden files pin down.
func representatives(t *testing.T) []plan.Kernel {
	t.Helper()
	p := frozen(t, "gfx1151")
	byFamily := map[string]plan.Kernel{}
	for _, k := range p.Kernels {
		if old, ok := byFamily[k.Family]; !ok || k.Name < old.Name {
			byFamily[k.Family] = k
		}
	}
	if len(byFamily) != len(kernels.Families) {
		t.Fatalf("plan has %d families, the table %d", len(byFamily), len(kernels.Families))
	}
	out := make([]plan.Kernel, 0, len(byFamily))
	for _, k := range byFamily {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out
}

// TestGolden renders a representative kernel of every family in both
// dialects and compares with testdata/golden (go test ./codegen -update).
func TestGolden(t *testing.T) {
	for _, k := range representatives(t) {
		for _, d := range []Dialect{HIP, CUDA} {
			s, err := Render(d, k)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", k.Family+d.SourceExt())
			if *update {
				if err := os.WriteFile(path, []byte(s.Code), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./codegen -update)", err)
			}
			if string(want) != s.Code {
				t.Errorf("%s is out of date (run go test ./codegen -update and review the diff)", path)
			}
		}
	}
}

// TestRenderFrozenPlans renders every kernel of both GPU plans and checks
// the properties every source must have: one entry point named after the
// kernel, no headers or device-library calls, and the plan's block size.
func TestRenderFrozenPlans(t *testing.T) {
	for _, target := range plan.GPUTargets() {
		p := frozen(t, target)
		srcs, err := RenderPlan(p)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if len(srcs) != len(p.Kernels) {
			t.Fatalf("%s: %d sources for %d kernels", target, len(srcs), len(p.Kernels))
		}
		families := map[string]bool{}
		for _, s := range srcs {
			families[s.Family] = true
			if !strings.Contains(s.Code, " "+s.Kernel+"(") || strings.Count(s.Code, "KERNEL void") != 1 {
				t.Errorf("%s: %s: entry point missing or repeated", target, s.Kernel)
			}
			for _, bad := range []string{"#include", "__ocml", "__ockl", "{{", "<no value>"} {
				if strings.Contains(s.Code, bad) {
					t.Errorf("%s: %s contains %q", target, s.Kernel, bad)
				}
			}
			if !strings.HasPrefix(s.Hash, "sha256:") || len(s.Hash) != 71 {
				t.Errorf("%s: %s: bad hash %q", target, s.Kernel, s.Hash)
			}
		}
		if len(families) != len(kernels.Families) {
			t.Errorf("%s: %d families rendered, the table has %d", target, len(families), len(kernels.Families))
		}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				if len(l.Block) != 3 || l.Block[0] != Threads || l.Block[1] != 1 || l.Block[2] != 1 {
					t.Fatalf("%s: %s: launch of %s has block %v, kernels are written for %d threads", target, ph.Name, l.Kernel, l.Block, Threads)
				}
			}
		}
	}
}

// TestRenderDeterministic guards the source hash: rendering twice gives
// the same bytes, and different parameters give different sources.
func TestRenderDeterministic(t *testing.T) {
	k := plan.Kernel{Name: "add_x", Family: "add", Params: ir.Params{Ints: map[string]int64{"width": 64}}}
	a, err := Render(CUDA, k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(CUDA, k)
	if a != b {
		t.Fatal("two renders differ")
	}
	k.Params = ir.Params{Ints: map[string]int64{"width": 65}}
	c, _ := Render(CUDA, k)
	if c.Hash == a.Hash || !strings.Contains(c.Code, "WIDTH = 65;") {
		t.Fatal("parameters are not folded into the source")
	}
	h, _ := Render(HIP, k)
	if h.Hash == c.Hash || !strings.Contains(h.Code, "amdgcn") || strings.Contains(c.Code, "amdgcn") {
		t.Fatal("dialect preludes are not distinct")
	}
}

// TestRenderErrors checks the refusals: unknown dialects, families,
// missing, undeclared and mistyped parameters, and bad names.
func TestRenderErrors(t *testing.T) {
	good := ir.Params{Ints: map[string]int64{"width": 8}}
	cases := []struct {
		d    Dialect
		k    plan.Kernel
		want string
	}{
		{"opencl", plan.Kernel{Name: "a", Family: "add", Params: good}, `unknown dialect "opencl"`},
		{CUDA, plan.Kernel{Name: "a", Family: "conv3d", Params: good}, `unknown kernel family "conv3d"`},
		{CUDA, plan.Kernel{Name: "a", Family: "add"}, "parameter width (integer) missing"},
		{CUDA, plan.Kernel{Name: "a", Family: "add", Params: ir.Params{Reals: map[string]float64{"width": 1.5}}}, "given as a real"},
		{CUDA, plan.Kernel{Name: "a", Family: "add", Params: ir.Params{Ints: map[string]int64{"width": 8, "height": 2}}}, "parameter height is not a parameter"},
		{HIP, plan.Kernel{Name: "a-b", Family: "add", Params: good}, "not a C identifier"},
	}
	for _, c := range cases {
		if _, err := Render(c.d, c.k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.k, err, c.want)
		}
	}
	for target, want := range map[plan.Target]Dialect{plan.GFX1151: HIP, plan.SM90: CUDA} {
		if d, err := target.Dialect(); err != nil || d != want {
			t.Errorf("%s.Dialect() = %q, %v", target, d, err)
		}
	}
	if _, err := plan.CPU.Dialect(); err == nil {
		t.Error("cpu.Dialect() has no error")
	}
	if _, err := RenderPlan(&plan.Plan{Target: "cpu"}); err == nil {
		t.Error("RenderPlan of a cpu plan has no error")
	}
}

// TestFloatLiterals checks that real parameters reach the source as the
// exact float32 the reference kernels use.
func TestFloatLiterals(t *testing.T) {
	for v, want := range map[float64]string{1e-06: "0x1.0c6f7ap-20f", 0.0625: "0x1p-04f", 1: "0x1p+00f", 0: "0.0f"} {
		if got := floatLit(v); got != want {
			t.Errorf("floatLit(%g) = %s, want %s", v, got, want)
		}
	}
}

// TestManifest checks the manifest lists every kernel with the hash of its
// rendered source and encodes canonically.
func TestManifest(t *testing.T) {
	p := frozen(t, "sm_90")
	m, err := NewManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Target != "sm_90" || len(m.Kernels) != len(p.Kernels) {
		t.Fatalf("manifest: target %q, %d kernels", m.Target, len(m.Kernels))
	}
	srcs, _ := RenderPlan(p)
	hashes := map[string]string{}
	for _, s := range srcs {
		hashes[s.Kernel] = s.Hash
	}
	for i, k := range m.Kernels {
		if k.SourceHash != hashes[k.Name] || k.Template != k.Family+".tmpl" {
			t.Errorf("manifest entry %s: %+v", k.Name, k)
		}
		if i > 0 && m.Kernels[i-1].Name >= k.Name {
			t.Errorf("manifest not sorted at %s", k.Name)
		}
	}
	a, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := json.Unmarshal(a, &back); err != nil {
		t.Fatal(err)
	}
	b, _ := back.Bytes()
	if !bytes.Equal(a, b) || !bytes.HasPrefix(a, []byte("{\n  \"target\": \"sm_90\",\n  \"kernels\": [")) {
		t.Errorf("manifest encoding is not canonical:\n%s", a[:min(len(a), 200)])
	}
}

// TestPlanAlignment checks the ABI's alignment promise on the GPU plans:
// every argument offset, dynamic stride and arena offset is a multiple of
// 16 bytes, so the kernels' 16-byte vector loads are aligned.
func TestPlanAlignment(t *testing.T) {
	for _, target := range plan.GPUTargets() {
		p := frozen(t, target)
		for _, ph := range p.Phases {
			for _, b := range ph.Buffers {
				if b.Offset%16 != 0 {
					t.Errorf("%s: %s: buffer %s at arena offset %d", target, ph.Name, b.Name, b.Offset)
				}
			}
			for _, l := range ph.Launches {
				for i, a := range l.Args {
					if a.Offset%16 != 0 || a.DynStride%16 != 0 {
						t.Errorf("%s: %s: %s argument %d: offset %d, dyn stride %d", target, ph.Name, l.Kernel, i, a.Offset, a.DynStride)
					}
				}
			}
		}
	}
}
