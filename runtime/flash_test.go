package runtime_test

import (
	"context"
	"math"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// TestFlashPrefillPlanBitIdentical runs the tiny checkpoint on the CPU
// with the prefill attention planned as attention_prefill and as the
// attention + attn_output_gate pair: the flash family's reference is the
// pair's, composed, so every logit of a prefill that spans two buckets
// (the second segment attends to the first one's cached rows) and of the
// decode steps after it is equal bit for bit.
func TestFlashPrefillPlanBitIdentical(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(a planner.PrefillAttention) [][]float32 {
		p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96, PrefillAttention: a})
		if err != nil {
			t.Fatal(err)
		}
		flash := 0
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				for _, k := range p.Kernels {
					if k.Name == l.Kernel && ir.Kind(k.Family) == ir.AttentionPrefill {
						flash++
					}
				}
			}
		}
		if (a == planner.PrefillFlash) != (flash > 0) {
			t.Fatalf("prefill attention %q: %d attention_prefill launches", a, flash)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		prompt := make([]int32, 45)
		for i := range prompt {
			prompt[i] = int32(1 + i*7%50)
		}
		logits, err := e.Prefill(ctx, prompt, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{logits}
		for range 3 {
			if logits, err = e.Decode(ctx, runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out
	}
	a, b := run(planner.PrefillFlash), run(planner.PrefillEager)
	for s := range a {
		for i := range a[s] {
			if math.Float32bits(a[s][i]) != math.Float32bits(b[s][i]) {
				t.Fatalf("step %d logit %d: flash %v, eager %v", s, i, a[s][i], b[s][i])
			}
		}
	}
}
