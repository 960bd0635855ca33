package runtime_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/runtime"
)

// TestPrefillGraphs: prefill buckets replayed from graphs captured once give
// the launch-by-launch logits bit for bit at every length around the bucket
// edges (full segments, tails, segments after earlier ones), and the
// graphs are reused across lengths rather than captured again.
func TestPrefillGraphs(t *testing.T) {
	p := open(t, []int{8, 32}, 256).Plan
	mk := func(be runtime.Backend) *runtime.Engine {
		e, err := runtime.NewEngine(p, be, runtime.SyntheticWeights(5))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	plain := mk(runtime.NewCPU())
	rec := &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}
	graphed := mk(rec)
	ctx := context.Background()
	for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 41, 70} {
		seq := prompt(n, plain.Vocab())
		var want, got [][]float32
		for _, c := range []struct {
			e   *runtime.Engine
			out *[][]float32
		}{{plain, &want}, {graphed, &got}} {
			if err := c.e.Reset(); err != nil {
				t.Fatal(err)
			}
			last, err := c.e.Prefill(ctx, seq, nil)
			if err != nil {
				t.Fatalf("%d tokens: %v", n, err)
			}
			next, err := c.e.Decode(ctx, seq[0])
			if err != nil {
				t.Fatal(err)
			}
			*c.out = [][]float32{last, next}
		}
		for i := range want {
			if !slices.Equal(want[i], got[i]) {
				t.Errorf("%d tokens: logits %d differ between the graphs and the launches", n, i)
			}
		}
	}
	if on, err := graphed.PrefillGraphs(); !on || err != nil {
		t.Fatalf("prefill graphs on %v, %v", on, err)
	}
	// Two buckets, each captured once (a graph before and after the last
	// row's LM head at most); the decode graph once.
	if rec.captures > 2*2+1 || rec.replays <= rec.captures {
		t.Errorf("%d captures, %d replays", rec.captures, rec.replays)
	}
	if rec.slotRows == 0 {
		t.Error("no captured launch reads its row count from a slot")
	}
	graphed.SetGraphs(false)
	if on, _ := graphed.PrefillGraphs(); on {
		t.Error("SetGraphs(false) left the prefill graphs on")
	}
}
