package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/buildinfo"
	"github.com/aimaproject/aimac/cliflag"
)

// TestFlags: every value flag shows a placeholder, every numeric one is
// bounded and refuses what is out of range naming the flag.
func TestFlags(t *testing.T) {
	for _, p := range cliflag.Audit(root(), map[string]string{"seed": "every uint64 is a seed",
		"context": "each length is checked against the plan's capacity", "bandwidth": "any positive rate, checked before use"}) {
		t.Error(p)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--context-tokens", "0"}, `invalid argument "0" for "--context-tokens" flag: want ≥ 1`},
		{[]string{"ir", "--context-tokens", "-1"}, `"--context-tokens" flag: want ≥ 1`},
		{[]string{"synth", "--layers", "-1"}, `"--layers" flag: want ≥ 0`},
		{[]string{"build", "--jobs", "-1"}, `"--jobs" flag: want ≥ 0`},
	} {
		_, _, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
	help, _, err := run("build", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help, "--plan FILE ") || strings.Contains(help, "--plan aimac") {
		t.Errorf("build --help:\n%s", help)
	}
}

func TestCompletion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"synth", "--preset", ""}, []string{"full", "tiny"}},
		{[]string{"plan", "--target", ""}, []string{"cpu", "sm_90", "gfx1151"}},
		{[]string{"plan", "--kv-dtype", ""}, []string{"f32", "bf16"}},
		{[]string{"build", "--target", ""}, []string{"sm_90", "gfx1151"}},
	} {
		out, _, err := run(append([]string{"__complete"}, tt.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" || !strings.HasSuffix(out, ":4\n") {
			t.Errorf("%v: %q (-want +got)\n%s", tt.args, out, diff)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run("--version")
	if err != nil {
		t.Fatal(err)
	}
	bi := buildinfo.Read()
	for _, want := range []string{"aimac " + bi.Version + "\n", "commit  " + bi.Commit, "go      " + bi.Go, "targets cpu, sm_90, gfx1151"} {
		if !strings.Contains(out, want) {
			t.Errorf("--version lacks %q:\n%s", want, out)
		}
	}
}
