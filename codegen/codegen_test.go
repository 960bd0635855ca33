package codegen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/plans"
)

var update = flag.Bool("update", false, "rewrite the golden sources under testdata/golden")

// frozen loads a frozen plan of the default model.
func frozen(t *testing.T, target string) *plan.Plan {
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
	if len(byFamily) != len(ir.Catalogue) {
		t.Fatalf("plan has %d families, catalogue %d", len(byFamily), len(ir.Catalogue))
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
			path := filepath.Join("testdata", "golden", k.Family+d.Ext())
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
	for _, target := range []string{"sm_90", "gfx1151"} {
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
		if len(families) != len(ir.Catalogue) {
			t.Errorf("%s: %d families rendered, catalogue has %d", target, len(families), len(ir.Catalogue))
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
	k := plan.Kernel{Name: "add_x", Family: "add", Params: map[string]float64{"width": 64}}
	a, err := Render(CUDA, k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(CUDA, k)
	if a != b {
		t.Fatal("two renders differ")
	}
	k.Params = map[string]float64{"width": 65}
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
// missing parameters, non-integer extents and bad names.
func TestRenderErrors(t *testing.T) {
	good := map[string]float64{"width": 8}
	cases := []struct {
		d Dialect
		k plan.Kernel
	}{
		{"opencl", plan.Kernel{Name: "a", Family: "add", Params: good}},
		{CUDA, plan.Kernel{Name: "a", Family: "conv3d", Params: good}},
		{CUDA, plan.Kernel{Name: "a", Family: "add", Params: map[string]float64{}}},
		{CUDA, plan.Kernel{Name: "a", Family: "add", Params: map[string]float64{"width": 1.5}}},
		{HIP, plan.Kernel{Name: "a-b", Family: "add", Params: good}},
	}
	for i, c := range cases {
		if _, err := Render(c.d, c.k); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
	for target, want := range map[string]Dialect{"gfx1151": HIP, "sm_90": CUDA} {
		if d, err := DialectFor(target); err != nil || d != want {
			t.Errorf("DialectFor(%s) = %q, %v", target, d, err)
		}
	}
	if _, err := DialectFor("cpu"); err == nil {
		t.Error("DialectFor(cpu) has no error")
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

// TestSourceABI checks that every source of the frozen plans says it
// implements plan.KernelABI and that its entry point is that ABI's: one
// pointer per operand of the family, then int n, then the parameter block.
func TestSourceABI(t *testing.T) {
	for _, target := range []string{"sm_90", "gfx1151"} {
		srcs, err := RenderPlan(frozen(t, target))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			if s.ABI != plan.KernelABI {
				t.Errorf("%s: %s: ABI %d, want %d", target, s.Kernel, s.ABI, plan.KernelABI)
			}
			_, rest, ok := strings.Cut(s.Code, "KERNEL void "+s.Kernel+"(")
			args, _, _ := strings.Cut(rest, ")")
			parts := strings.Split(args, ", ")
			ops := len(ir.Catalogue[ir.Kind(s.Family)].Operands)
			if !ok || len(parts) != ops+2 || parts[ops] != "int n" || parts[ops+1] != "const int* params" {
				t.Errorf("%s: %s: entry point takes (%s), want %d operand pointers, int n, const int* params", target, s.Kernel, args, ops)
				continue
			}
			for _, a := range parts[:ops] {
				if !strings.Contains(a, "* ") {
					t.Errorf("%s: %s: operand argument %q is not a pointer", target, s.Kernel, a)
				}
			}
		}
	}
}

// TestPlanAlignment checks the ABI's alignment promise on the GPU plans:
// every argument offset, dynamic stride and arena offset is a multiple of
// plan.ArgAlign bytes, so the kernels' 16-byte vector loads are aligned.
func TestPlanAlignment(t *testing.T) {
	for _, target := range []string{"sm_90", "gfx1151"} {
		p := frozen(t, target)
		for _, ph := range p.Phases {
			for _, b := range ph.Buffers {
				if b.Offset%plan.ArgAlign != 0 {
					t.Errorf("%s: %s: buffer %s at arena offset %d", target, ph.Name, b.Name, b.Offset)
				}
			}
			for _, l := range ph.Launches {
				for i, a := range l.Args {
					if a.Offset%plan.ArgAlign != 0 || a.DynStride%plan.ArgAlign != 0 {
						t.Errorf("%s: %s: %s argument %d: offset %d, dyn stride %d", target, ph.Name, l.Kernel, i, a.Offset, a.DynStride)
					}
				}
			}
		}
	}
}
