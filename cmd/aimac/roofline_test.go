package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/roofline"
)

// TestRoofline: the table's total and tok/s are the byte model's bytes
// over the bandwidth given, for a frozen plan read from a file.
func TestRoofline(t *testing.T) {
	// An sm_90 plan with the certified head (off by default).
	f := filepath.Join(t.TempDir(), "plan.json")
	if _, _, err := run("plan", "--target", "sm_90", "--buckets", "1024", "--context-tokens", "16384", "--out", f); err != nil {
		t.Fatal(err)
	}
	p, err := plan.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run("roofline", "--plan", f, "--context", "1024,8192", "--bandwidth", "256,4000", "--families")
	if err != nil {
		t.Fatal(err)
	}
	for _, ctx := range []int{1024, 8192} {
		s, err := roofline.Decode(p, ctx)
		if err != nil {
			t.Fatal(err)
		}
		total := float64(s.Total.Total())
		for _, bw := range []float64{256, 4000} {
			want := fmt.Sprintf("%.3f  %4.0f  %.2f  %.1f", total/1e9, bw, total/(bw*1e9)*1e3, bw*1e9/total)
			if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
				t.Errorf("context %d at %v GB/s: no row ending %q in\n%s", ctx, bw, want, out)
			}
		}
	}
	if !strings.Contains(out, "by family at context 1024") || !strings.Contains(out, "moe_decode_gate_up") {
		t.Errorf("--families printed no family table:\n%s", out)
	}
}

// TestRooflineGreedy: --greedy prints the greedy decode step's bytes (the
// certified int8 LM head), half the LM head fewer than decode's.
func TestRooflineGreedy(t *testing.T) {
	// An sm_90 plan with the certified head (off by default).
	f := filepath.Join(t.TempDir(), "plan.json")
	if _, _, err := run("plan", "--target", "sm_90", "--buckets", "1024", "--context-tokens", "4096", "--out", f); err != nil {
		t.Fatal(err)
	}
	p, err := plan.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := run("roofline", "--plan", f, "--context", "1024", "--bandwidth", "4000", "--greedy")
	if err != nil {
		t.Fatal(err)
	}
	g, err := roofline.Greedy(p, 1024)
	if err != nil {
		t.Fatal(err)
	}
	d, err := roofline.Decode(p, 1024)
	if err != nil {
		t.Fatal(err)
	}
	total := float64(g.Total.Total())
	if saved := d.Total.Total() - g.Total.Total(); saved < 500e6 || saved > 510e6 {
		t.Errorf("greedy moves %d bytes fewer than decode, want about half the 1.02 GB head", saved)
	}
	want := fmt.Sprintf("%.3f  %4.0f  %.2f  %.1f", total/1e9, 4000.0, total/(4000e9)*1e3, 4000e9/total)
	if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
		t.Errorf("no row ending %q in\n%s", want, out)
	}
}

func TestRooflineErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"roofline", "--bandwidth", "0"}, "--bandwidth 0: want a positive rate"},
		{[]string{"roofline", "--bandwidth", "x"}, `invalid argument "x" for "--bandwidth"`},
		{[]string{"roofline", "--context", "0"}, "--context 0: want 1 to the plan's"},
		{[]string{"roofline", "--context-tokens", "4096", "--context", "8192"}, "--context 8192: want 1 to the plan's 4096"},
		{[]string{"roofline", "--target", "cpu", "--context-tokens", "4096", "--context", "1024"}, "target cpu has no nominal bandwidth: give --bandwidth"},
		{[]string{"roofline", "--plan", "/nonexistent/plan.json"}, "plan.json"},
	} {
		_, _, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}
