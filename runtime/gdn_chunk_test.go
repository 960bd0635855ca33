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

// TestChunkedGDNPlanMatchesSerial runs the tiny checkpoint on the CPU with
// the prefill GDN planned as gated_delta_wy + gated_delta_state and the
// parallel conv (--prefill-gdn wy) and as the serial families: a prompt of
// 45 tokens spans two buckets (the second segment continues from the first
// one's GDN and conv states, with a partial chunk), then decode steps read
// the states the prefill left. The chunked form sums in other orders than
// the recurrence, so the logits agree to 1e-4 of the largest, not bit for
// bit; the plan must hold the new families (the pass ran) and nothing of
// the serial ones in prefill.
func TestChunkedGDNPlanMatchesSerial(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(g planner.PrefillGDN) [][]float32 {
		p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96, PrefillGDN: g})
		if err != nil {
			t.Fatal(err)
		}
		families := map[ir.Kind]int{}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				for _, k := range p.Kernels {
					if k.Name == l.Kernel {
						families[ir.Kind(k.Family)]++
					}
				}
			}
		}
		chunked := families[ir.GatedDeltaWY] > 0 && families[ir.GatedDeltaState] > 0 && families[ir.CausalConv1dSiLURows] > 0
		if (g == planner.PrefillGDNWY) != chunked || (chunked && families[ir.GatedDeltaChunked] > 0) {
			t.Fatalf("prefill gdn %q: launches by family %v", g, families)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		prompt := make([]int32, 45)
		for i := range prompt {
			prompt[i] = int32(1 + i*11%50)
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
	a, b := run(planner.PrefillGDNWY), run(planner.PrefillGDNChunked)
	for s := range a {
		var diff, mag float64
		for i := range a[s] {
			diff = math.Max(diff, math.Abs(float64(a[s][i])-float64(b[s][i])))
			mag = math.Max(mag, math.Abs(float64(b[s][i])))
		}
		t.Logf("step %d: logits differ by %.3g (largest %.3g)", s, diff, mag)
		if diff > 1e-4*math.Max(1, mag) {
			t.Errorf("step %d: logits differ by %g (largest %g)", s, diff, mag)
		}
	}
}
