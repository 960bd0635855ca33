package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/plans"
)

// run executes the CLI with args and returns stdout, stderr and the error.
func run(args ...string) (string, string, error) {
	c := root()
	var out, errb bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), errb.String(), err
}

// TestPlanEmbeddedIsFrozen: `aimac plan` with no model directory writes the
// real model's plan, byte-identical on every run and equal to plans/.
func TestPlanEmbeddedIsFrozen(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, f := range []string{a, b} {
		if _, _, err := run("plan", "--target", "cpu", "--out", f); err != nil {
			t.Fatal(err)
		}
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	frozen, err := plans.Frozen("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, bb) || !bytes.Equal(ab, frozen) {
		t.Error("aimac plan output differs between runs or from the frozen plan")
	}
}

func TestSynthPlanAndDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, _, err := run("synth", "--preset", "tiny", "--seed", "3", "--out", dir); err != nil {
		t.Fatal(err)
	}
	out, _, err := run("plan", "--model-dir", dir, "--target", "gfx1151", "--buckets", "16,64", "--context-tokens", "256")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"target": "gfx1151"`) {
		t.Errorf("plan output lacks the target:\n%.300s", out)
	}
	if out, _, err := run("ir", "--model-dir", dir, "--step", "prefill:16"); err != nil || !strings.Contains(out, "gated_delta_chunked") {
		t.Errorf("ir dump: %v\n%.300s", err, out)
	}
	// The graph after each pass: fused on a GPU target, then launches.
	lowered, _, err := run("ir", "--model-dir", dir, "--target", "sm_90", "--after", "lower")
	fused, _, err2 := run("ir", "--model-dir", dir, "--target", "sm_90", "--after", "fuse")
	configured, _, err3 := run("ir", "--model-dir", dir, "--target", "sm_90", "--after", "configure")
	scheduled, _, err4 := run("ir", "--model-dir", dir, "--target", "sm_90")
	if err := errors.Join(err, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lowered, "mixer_out") || strings.Contains(lowered, "matmul_add") || strings.Contains(lowered, "grid=") {
		t.Errorf("ir --after lower:\n%.600s", lowered)
	}
	if strings.Contains(fused, "mixer_out") || !strings.Contains(fused, "matmul_add(y=") || strings.Contains(fused, "grid=") {
		t.Errorf("ir --after fuse:\n%.600s", fused)
	}
	if !strings.Contains(configured, "grid=[") || strings.Contains(configured, " live=[") {
		t.Errorf("ir --after configure:\n%.600s", configured)
	}
	if !strings.Contains(scheduled, " live=[") {
		t.Errorf("ir (after schedule):\n%.600s", scheduled)
	}
	if out, _, err := run("ir", "--passes"); err != nil || out != "lower\nfuse\nsplit_kv\nflash\ngdn\nstream\ntile\ncertify\nconfigure\nschedule\n" {
		t.Errorf("ir --passes: %q, %v", out, err)
	}
	// Refuse to overwrite, then damage the checkpoint: every problem named.
	if _, _, err := run("synth", "--preset", "tiny", "--out", dir); err == nil {
		t.Error("synth overwrote a non-empty directory")
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "model-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("want several shards, got %v", shards)
	}
	if err := os.Truncate(shards[0], 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(shards[1]); err != nil {
		t.Fatal(err)
	}
	_, _, err = run("plan", "--model-dir", dir)
	if err == nil {
		t.Fatal("plan accepted a damaged checkpoint")
	}
	for _, want := range []string{filepath.Base(shards[0]), filepath.Base(shards[1])} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--buckets", "8,x"}, `"x" is not an integer`},
		{[]string{"plan", "--target", "tpu"}, `target "tpu"`},
		{[]string{"plan", "--model-dir", "/nonexistent"}, "/nonexistent: not a readable directory"},
		{[]string{"synth", "--preset", "huge", "--out", "x"}, "huge"},
		{[]string{"synth"}, "--out is required"},
		{[]string{"ir", "--step", "prefill:zero"}, "want prefill:N"},
		{[]string{"ir", "--step", "train"}, "want prefill:N"},
		{[]string{"ir", "--after", "inline"}, `no planner pass "inline"`},
		{[]string{"plan", "--fusion", "maybe"}, `fusion "maybe": want "on", "off"`},
		{[]string{"plan", "--tiling", "maybe"}, `tiling "maybe": want "on", "off"`},
		{[]string{"plan", "--prefill-attention", "fast"}, `prefill attention "fast": want one of ["flash" "flash-bf16" "wgmma" "wgmma-bf16" "wgmma-fp16" "eager"]`},
		{[]string{"plan", "--prefill-gdn", "fast"}, `prefill gdn "fast": want "wy", "wy-tf32", "chunked"`},
		{[]string{"plan", "--decode-splits", "5000"}, `invalid argument "5000" for "--decode-splits" flag: want -1 to 1024`},
		{[]string{"plan", "--decode-mma", "maybe"}, `decode mma "maybe": want "on", "fused", "off"`},
		{[]string{"plan", "--target", "sm_90", "--decode-mma", "on", "--decode-stream"}, "decode mma on and decode stream"},
		{[]string{"plan", "--gdn-col-tile", "-2"}, `invalid argument "-2" for "--gdn-col-tile" flag: want -1 to 65536`},
		{[]string{"ir", "--target", "tpu"}, `target "tpu" is not one of`},
		{[]string{"plan", "--gemm-tile", "sideways"}, `gemm tile "sideways": want "wgmma", "wgmma-ws", "mma"`},
		{[]string{"plan", "--target", "gfx1151", "--gemm-tile", "wgmma-ws"}, `gemm tile "wgmma-ws": target gfx1151 has no wgmma`},
	}
	for _, tt := range tests {
		_, _, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}
