package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/bundler"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/synth"
)

// gfx1151Bundle synthesizes the tiny model and builds a gfx1151 bundle of
// its plan with clang-19 (required), returning the model and bundle dirs.
func gfx1151Bundle(t *testing.T) (model, dir string) {
	t.Helper()
	c, err := hipcc.Find(hipcc.GFX1151)
	if err != nil {
		t.Fatalf("%v\ninstall clang-19 lld-19 llvm-19", err)
	}
	model = filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: model}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "gfx1151", Buckets: []int{16, 64}, ContextTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "bundle")
	if _, err := bundler.Build(context.Background(), p, "gfx1151", bundler.Options{Out: dir, Compiler: c}); err != nil {
		t.Fatal(err)
	}
	return model, dir
}

// TestBundleFlag: --bundle loads a verified gfx1151 bundle through the
// loader up to the HIP backend, which needs a ROCm runtime this machine does
// not have (the backend itself is tested against a fake one); the
// plan's fingerprint is still held to --model-dir, and a damaged bundle is
// refused naming the file.
func TestBundleFlag(t *testing.T) {
	model, dir := gfx1151Bundle(t)
	noBackend := "a ROCm runtime is needed to run gfx1151 plans"
	other := filepath.Join(t.TempDir(), "other")
	if err := synth.Write(synth.Options{Preset: "tiny", Layers: 2, Seed: 1, Out: other}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"probe", "generate", "--model-dir", model, "--bundle", dir, "--tokens", "1,2"}, noBackend},
		{[]string{"probe", "logits", "--model-dir", model, "--bundle", dir, "--tokens", "1,2", "--out", filepath.Join(t.TempDir(), "l.npy")}, noBackend},
		{[]string{"serve", "--model-dir", model, "--bundle", dir, "--port", "0"}, noBackend},
		{[]string{"probe", "generate", "--model-dir", other, "--bundle", dir, "--tokens", "1"}, "was made for model"},
		{[]string{"probe", "generate", "--model-dir", model, "--bundle", dir, "--plan", filepath.Join(dir, "plan.json"), "--tokens", "1"}, "give one of --plan and --bundle"},
		{[]string{"probe", "generate", "--model-dir", model, "--bundle", filepath.Join(dir, "nope"), "--tokens", "1"}, "build one with `aimac build`"},
	}
	for _, tt := range tests {
		_, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}

	objs, _ := filepath.Glob(filepath.Join(dir, "kernels", "*.hsaco"))
	if len(objs) == 0 {
		t.Fatal("bundle has no code objects")
	}
	if err := os.Remove(objs[0]); err != nil {
		t.Fatal(err)
	}
	_, err := run("probe", "generate", "--model-dir", model, "--bundle", dir, "--tokens", "1")
	if err == nil || !strings.Contains(err.Error(), filepath.Base(objs[0])+": missing") {
		t.Errorf("damaged bundle: %v", err)
	}
}
