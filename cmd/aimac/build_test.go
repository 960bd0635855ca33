package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/bundle"
)

// TestBuildCommand builds a gfx1151 bundle of the tiny model through the CLI
// (clang-19 required), then again from the cache, and opens the result.
func TestBuildCommand(t *testing.T) {
	tmp := t.TempDir()
	dir, planFile := filepath.Join(tmp, "tiny"), filepath.Join(tmp, "plan.json")
	if _, _, err := run("synth", "--preset", "tiny", "--out", dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run("plan", "--model-dir", dir, "--target", "gfx1151", "--buckets", "16,64", "--context-tokens", "256", "--out", planFile); err != nil {
		t.Fatal(err)
	}
	out, cache := filepath.Join(tmp, "bundle"), filepath.Join(tmp, "cache")
	args := []string{"build", "--plan", planFile, "--target", "gfx1151", "--out", out, "--cache-dir", cache, "--device-flags", "-O3"}
	stdout, _, err := run(args...)
	if err != nil {
		t.Fatalf("%v\ninstall clang-19 lld-19 llvm-19 if the compiler is missing", err)
	}
	if !strings.Contains(stdout, "(0 from the cache)") {
		t.Errorf("first build: %q", stdout)
	}
	if stdout, _, err = run(args...); err != nil || !strings.Contains(stdout, "kernels (") || strings.Contains(stdout, "(0 from the cache)") {
		t.Errorf("rebuild over the previous bundle: %q %v", stdout, err)
	}
	b, err := bundle.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Manifest.Flags; len(got) != 1 || got[0] != "-O3" {
		t.Errorf("manifest flags %q, want [-O3]", got)
	}

	// Flags from the environment when --device-flags is absent.
	t.Setenv("AIMAC_DEVICE_FLAGS", "-O2 'unbalanced")
	if _, _, err := run("build", "--plan", planFile, "--target", "gfx1151", "--out", out); err == nil || !strings.Contains(err.Error(), "unbalanced") {
		t.Errorf("bad $AIMAC_DEVICE_FLAGS: %v", err)
	}
}

func TestBuildFlagErrors(t *testing.T) {
	tmp := t.TempDir()
	cpuPlan := filepath.Join(tmp, "cpu.json")
	if _, _, err := run("plan", "--buckets", "64", "--context-tokens", "256", "--out", cpuPlan); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "out")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"build", "--target", "gfx1151", "--out", out}, "--plan is required"},
		{[]string{"build", "--plan", cpuPlan, "--out", out}, "--target is required"},
		{[]string{"build", "--plan", cpuPlan, "--target", "cpu", "--out", out}, `--target "cpu": want sm_90, gfx1151`},
		{[]string{"build", "--plan", cpuPlan, "--target", "gfx1151"}, "--out is required"},
		{[]string{"build", "--plan", cpuPlan, "--target", "gfx1151", "--out", out, "--device-flags", "-O3 'x"}, "check quotes"},
		{[]string{"build", "--plan", filepath.Join(tmp, "none.json"), "--target", "gfx1151", "--out", out}, "none.json"},
		{[]string{"build", "--plan", cpuPlan, "--target", "gfx1151", "--out", out}, "the plan is for target cpu, not gfx1151"},
		{[]string{"build", "--plan", cpuPlan, "--target", "sm_90", "--out", out}, "the plan is for target cpu, not sm_90"},
		{[]string{"build", "extra", "--plan", cpuPlan}, "unknown command"},
	}
	for _, tt := range tests {
		_, _, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused build created --out")
	}
}
