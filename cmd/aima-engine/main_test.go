package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/npy"
	"github.com/aimaproject/aimac/synth"
)

func run(args ...string) (string, error) {
	c := root()
	var out, errb bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

// TestProbes runs both probes end to end on the synthetic tiny model.
func TestProbes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 5, Out: dir}); err != nil {
		t.Fatal(err)
	}
	out, err := run("probe", "generate", "--model-dir", dir, "--tokens", "1,2,3,4,5", "--max-tokens", "12", "--buckets", "4,16")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	if err := json.Unmarshal([]byte(out), &ids); err != nil || len(ids) != 12 {
		t.Fatalf("generate printed %q (%v), want 12 ids", out, err)
	}
	again, err := run("probe", "generate", "--model-dir", dir, "--tokens", "1,2,3,4,5", "--max-tokens", "12", "--buckets", "64")
	if err != nil || again != out {
		t.Errorf("greedy output depends on the buckets: %q vs %q (%v)", out, again, err)
	}
	f := filepath.Join(t.TempDir(), "logits.npy")
	if _, err := run("probe", "logits", "--model-dir", dir, "--tokens", "1,2,3,4,5", "--out", f); err != nil {
		t.Fatal(err)
	}
	shape, data, err := npy.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(shape) != 2 || shape[0] != 5 || len(data) != shape[0]*shape[1] {
		t.Errorf("logits shape %v", shape)
	}
	// The same positions through the decode step: the last 3, then all 5
	// (more than the prompt holds), against the prefill's logits.
	for _, last := range []string{"3", "9"} {
		g := filepath.Join(t.TempDir(), "decoded.npy")
		if _, err := run("probe", "logits", "--model-dir", dir, "--tokens", "1,2,3,4,5", "--decode-last", last, "--out", g); err != nil {
			t.Fatal(err)
		}
		dshape, decoded, err := npy.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(shape, dshape); diff != "" {
			t.Fatalf("--decode-last %s: shape (-prefill +decode):\n%s", last, diff)
		}
		worst := 0.0
		for i := range data {
			worst = max(worst, math.Abs(float64(data[i]-decoded[i])))
		}
		if worst > 1e-3 {
			t.Errorf("--decode-last %s: decode logits differ from the prefill's by up to %g", last, worst)
		}
	}
}

func TestProbeErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"probe", "generate", "--tokens", "1"}, "--model-dir is required"},
		{[]string{"probe", "generate", "--model-dir", "x", "--tokens", "1,a"}, `"a" is not a token id`},
		{[]string{"probe", "generate", "--model-dir", "x"}, "--tokens is required"},
		{[]string{"probe", "logits", "--model-dir", "x", "--tokens", "1"}, "--out is required"},
		{[]string{"probe", "logits", "--model-dir", "x", "--tokens", "1", "--out", "o.npy", "--decode-last", "-1"}, "--decode-last"},
		{[]string{"probe", "generate", "--model-dir", "/nonexistent", "--tokens", "1"}, "/nonexistent: not a readable directory"},
		{[]string{"probe", "generate", "--model-dir", "x", "--tokens", "1", "--plan", "p.json", "--buckets", "8"}, "--buckets plans the model on the spot"},
	}
	for _, tt := range tests {
		_, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}
