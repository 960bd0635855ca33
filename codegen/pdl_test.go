package codegen

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

func TestPDLEntry(t *testing.T) {
	cases := []struct {
		name, text, want, err string
	}{
		{name: "inserted", text: "// x\nKERNEL void k(int n, const int* params) {\n  y();\n}\n",
			want: "// x\nKERNEL void k(int n, const int* params) {\n  PDL_ENTRY();\n  y();\n}\n"},
		{name: "own wait", text: "KERNEL void k(int n) {\n  PDL_WAIT();\n  PDL_TRIGGER();\n}\n",
			want: "KERNEL void k(int n) {\n  PDL_WAIT();\n  PDL_TRIGGER();\n}\n"},
		{name: "wait without trigger", text: "KERNEL void k(int n) {\n  PDL_WAIT();\n}\n", err: "never PDL_TRIGGER()"},
		{name: "helper's wait", text: "DEVICE void h() { PDL_WAIT(); PDL_TRIGGER(); }\nKERNEL void k(int n) {\n  h();\n}\n",
			want: "DEVICE void h() { PDL_WAIT(); PDL_TRIGGER(); }\nKERNEL void k(int n) {\n  PDL_ENTRY();\n  h();\n}\n"},
		{name: "no entry point", text: "KERNEL void other(int n) {}\n", err: `no "KERNEL void k("`},
		{name: "no body", text: "KERNEL void k(int n);\n", err: "has no body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := pdlEntry("k", c.text)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestPDLEveryKernel checks that every kernel of the frozen sm_90 plan
// waits for the launches before it (the decode step launches them all with
// programmatic serialization) and that the wait reaches the PTX; the HIP
// sources spell the macros as no-ops.
func TestPDLEveryKernel(t *testing.T) {
	for _, target := range []string{"sm_90", "gfx1151"} {
		srcs, err := RenderPlan(frozen(t, plan.Target(target)))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			body := s.Code[strings.Index(s.Code, "KERNEL void "+s.Kernel+"("):]
			if !strings.Contains(body, "PDL_ENTRY();") && !strings.Contains(body, "PDL_WAIT();") {
				t.Errorf("%s %s (%s): the entry point never waits (PDL_ENTRY or PDL_WAIT)", target, s.Kernel, s.Family)
			}
		}
	}
	c := clang(t)
	srcs, _, _ := uniqueSources(t, "sm_90")
	results, err := c.SyntaxCheckCUDA(context.Background(), srcs, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		for _, ins := range []string{"griddepcontrol.wait", "griddepcontrol.launch_dependents"} {
			if !bytes.Contains(r.Object, []byte(ins)) {
				t.Errorf("%s: no %s in the PTX", r.Name, ins)
			}
		}
	}
}

// TestRowsEntry: the entry point's first statement takes a negative row
// count from the parameter block; helpers above it are left alone.
func TestRowsEntry(t *testing.T) {
	cases := []struct {
		name, text, want, err string
	}{
		{name: "inserted", text: "DEVICE void h(int n) {}\nKERNEL void k(int n, const int* params) {\n  PDL_ENTRY();\n}\n",
			want: "DEVICE void h(int n) {}\nKERNEL void k(int n, const int* params) {\n  if (n < 0) n = params[-n - 1];\n  PDL_ENTRY();\n}\n"},
		{name: "no entry point", text: "KERNEL void other(int n) {}\n", err: "no entry point"},
		{name: "no body", text: "KERNEL void k(int n);\n", err: "has no body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := rowsEntry("k", c.text)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
