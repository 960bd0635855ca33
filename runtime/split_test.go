package runtime_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// TestSplitKVDecodeMatchesAttention runs the tiny checkpoint on the CPU
// with the decode attention split (attention_decode_split +
// attention_combine, as the GPU plans run it) into 1, 3 and 64 splits
// (more than the context: most splits neutral) and with attention, the
// oracle: a prefill and eight greedy decode steps give the same tokens and
// logits within float32 rounding of the reordered sums.
func TestSplitKVDecodeMatchesAttention(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(splits int) ([]int32, [][]float32) {
		p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96, DecodeSplits: splits})
		if err != nil {
			t.Fatal(err)
		}
		split := 0
		for _, k := range p.Kernels {
			if ir.Kind(k.Family) == ir.AttentionDecodeSplit {
				split++
			}
		}
		if (splits > 0) != (split > 0) {
			t.Fatalf("%d splits: %d split kernels", splits, split)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		logits, err := e.Prefill(ctx, []int32{1, 5, 9, 2, 7, 3, 11, 4, 6, 8, 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		var out [][]float32
		for range 8 {
			id := runtime.Argmax(logits)
			ids = append(ids, id)
			if logits, err = e.Decode(ctx, id); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return ids, out
	}
	wantIDs, want := run(0)
	for _, splits := range []int{1, 3, 64} {
		ids, got := run(splits)
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("%d splits: greedy tokens (-attention +split):\n%s", splits, diff)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-4, 1e-5)); diff != "" {
			t.Errorf("%d splits: decode logits (-attention +split):\n%s", splits, diff)
		}
	}
}
