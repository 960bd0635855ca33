package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/npy"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// hfFixture is the committed HuggingFace transformers reference: a small
// random qwen3_5_moe checkpoint in the real layout and fp32 logits made by
// oracle/hf_fixture.py.
const hfFixture = "../testdata/hf-tiny"

type reference struct {
	Prompts []struct {
		Tokens []int32 `json:"tokens"`
		Logits string  `json:"logits"`
	} `json:"prompts"`
	Greedy struct {
		Prompt []int32 `json:"prompt"`
		Tokens []int32 `json:"tokens"`
	} `json:"greedy"`
}

func readReference(t *testing.T) reference {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(hfFixture, "reference.json"))
	if err != nil {
		t.Fatalf("HuggingFace fixture: %v (regenerate it with oracle/hf_fixture.py)", err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Prompts) == 0 || len(ref.Greedy.Tokens) == 0 {
		t.Fatal("reference.json has no prompts or no greedy continuation")
	}
	return ref
}

// TestHuggingFaceLogits holds the CPU backend to transformers: max
// per-position KLD ≤ 1e-4 and the same top-1 at every position, for prompts
// that cross the GDN chunk and, with small buckets, several prefill segments
// with a masked tail.
func TestHuggingFaceLogits(t *testing.T) {
	ref := readReference(t)
	for _, buckets := range [][]int{{256}, {8, 32}} {
		l, err := loader.Open(loader.Options{ModelDir: hfFixture, Buckets: buckets, ContextTokens: 512})
		if err != nil {
			t.Fatal(err)
		}
		checkHFLogits(t, ref, l.Engine, fmt.Sprintf("buckets %v", buckets), 1e-4)
		l.Close()
	}
}

// TestHuggingFaceLogitsTiled holds the tiled plan (gemm, gemm_add and the
// grouped MoE chain in prefill and the logits pass, their references
// computing what the tensor cores do: the activations as two bf16 terms
// where the plan splits them; the prefill GDN in the chunked form,
// gated_delta_wy + gated_delta_state and the parallel conv, as the GPU
// plans' default) to transformers by the CPU's own gate, run on the CPU:
// what the GPU plans compute, to within the order of their fp32 sums.
func TestHuggingFaceLogitsTiled(t *testing.T) {
	ref := readReference(t)
	ck, err := checkpoint.Open(hfFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("hf-tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	for _, buckets := range [][]int{{256}, {8, 32}} {
		p, err := planner.Plan(m, planner.Options{Target: plan.CPU, Buckets: buckets, ContextTokens: 512, Tiling: planner.TileOn, PrefillGDN: planner.PrefillGDNWY})
		if err != nil {
			t.Fatal(err)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		checkHFLogits(t, ref, e, fmt.Sprintf("tiled, buckets %v", buckets), 1e-4)
		e.Close()
	}
}

// checkHFLogits prefills every reference prompt on e and holds each
// position's logits to transformers': KLD ≤ limit, the same top-1.
func checkHFLogits(t *testing.T, ref reference, e *runtime.Engine, what string, limit float64) {
	t.Helper()
	for _, p := range ref.Prompts {
		shape, want, err := npy.ReadFile(filepath.Join(hfFixture, p.Logits))
		if err != nil {
			t.Fatal(err)
		}
		V := shape[1]
		if shape[0] != len(p.Tokens) || V != e.Vocab() {
			t.Fatalf("%s: shape %v for %d tokens, vocab %d", p.Logits, shape, len(p.Tokens), e.Vocab())
		}
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		var maxKL float64
		mismatches := 0
		last, err := e.Prefill(context.Background(), p.Tokens, func(start int, rows [][]float32) error {
			for i, got := range rows {
				pos := start + i
				w := want[pos*V : (pos+1)*V]
				maxKL = math.Max(maxKL, klDivergence(w, got))
				if runtime.Argmax(w) != runtime.Argmax(got) {
					mismatches++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		lastWant := want[(len(p.Tokens)-1)*V:]
		if kl := klDivergence(lastWant, last); kl > limit {
			t.Errorf("%s, %d tokens: next-token logits KLD %.3g", what, len(p.Tokens), kl)
		}
		t.Logf("%s, %3d tokens: max KLD %.3g, top-1 mismatches %d", what, len(p.Tokens), maxKL, mismatches)
		if maxKL > limit || mismatches > 0 {
			t.Errorf("%s, %d tokens: max KLD %.3g (limit %.3g), %d top-1 mismatches", what, len(p.Tokens), maxKL, limit, mismatches)
		}
	}
}

// TestHuggingFaceGreedy: the 24-token greedy continuation equals transformers'.
func TestHuggingFaceGreedy(t *testing.T) {
	ref := readReference(t)
	l, err := loader.Open(loader.Options{ModelDir: hfFixture, Buckets: []int{4, 16}, ContextTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := runtime.NewSampler(runtime.SamplerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Engine.Generate(context.Background(), ref.Greedy.Prompt, len(ref.Greedy.Tokens), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ref.Greedy.Tokens, got); diff != "" {
		t.Errorf("greedy continuation (-transformers +ours):\n%s", diff)
	}
}
