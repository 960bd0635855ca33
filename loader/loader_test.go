package loader

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/synth"
)

func TestOpenWithPlanFile(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: a}); err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 2, Layers: 8, Out: b}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint("a", ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(tmp, "a.plan.json")
	if err := p.WriteFile(planFile); err != nil {
		t.Fatal(err)
	}

	l, err := Open(Options{ModelDir: a, PlanFile: planFile})
	if err != nil {
		t.Fatal(err)
	}
	if l.Engine.Capacity() != 64 || l.TokenizerVocab != 933 {
		t.Errorf("capacity %d, tokenizer vocab %d", l.Engine.Capacity(), l.TokenizerVocab)
	}
	l.Close()

	// A plan made for another model is refused by fingerprint.
	if _, err := Open(Options{ModelDir: b, PlanFile: planFile}); err == nil || !strings.Contains(err.Error(), "was made for model") {
		t.Errorf("foreign plan: error %v", err)
	}
	// A plan for a target this build cannot run is refused clearly.
	p.Target = "sm_90"
	gpuPlan := filepath.Join(tmp, "gpu.plan.json")
	if err := p.WriteFile(gpuPlan); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{ModelDir: a, PlanFile: gpuPlan}); err == nil || !strings.Contains(err.Error(), "target sm_90") {
		t.Errorf("gpu plan: error %v", err)
	}
}

func TestMemoryPlanRefusesWhatDoesNotFit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 100000, MemoryLimit: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "for 100000 context tokens") || !strings.Contains(err.Error(), "lower --context-tokens") {
		t.Errorf("error %v", err)
	}
	l, err := Open(Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 64, PrefixCacheBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Memory.KV == 0 || l.Memory.PrefixCache != 1000 {
		t.Errorf("memory plan %+v", l.Memory)
	}
}

// TestSyntheticWeights: only config.json is read; the plan's fingerprint is
// the one the checkpoint's config and shipped dtypes give.
func TestSyntheticWeights(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: src}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 32, Synthetic: true, SyntheticSeed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Checkpoint != nil {
		t.Error("synthetic weights opened a checkpoint")
	}
	if _, err := l.Engine.Prefill(context.Background(), []int32{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{ModelDir: t.TempDir(), Buckets: []int{8}, ContextTokens: 32, Synthetic: true}); err == nil {
		t.Error("synthetic weights without a config.json were accepted")
	}
}
