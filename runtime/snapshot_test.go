package runtime_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/runtime"
)

// TestSnapshotRestore: restoring a snapshot and continuing gives exactly the
// logits of an uninterrupted run, and the snapshot survives its use.
func TestSnapshotRestore(t *testing.T) {
	l := open(t, []int{8, 32}, 256)
	e := l.Engine
	ctx := context.Background()
	seq := prompt(50, e.Vocab())
	want := teacherForced(t, e, seq)

	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	last, err := e.Prefill(ctx, seq[:30], nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.Snapshot(last)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Position() != 30 || snap.Bytes() <= 0 {
		t.Fatalf("snapshot at %d, %d bytes", snap.Position(), snap.Bytes())
	}
	for round := 0; round < 2; round++ {
		// Wreck the state with another sequence, then restore.
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Prefill(ctx, prompt(40, 7), nil); err != nil {
			t.Fatal(err)
		}
		if err := e.Restore(snap); err != nil {
			t.Fatal(err)
		}
		got := make([][]float32, len(seq))
		got[29] = snap.Logits()
		_, err := e.Prefill(ctx, seq[30:45], func(start int, rows [][]float32) error {
			for i, r := range rows {
				got[30+start+i] = append([]float32(nil), r...)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := 45; i < len(seq); i++ {
			if got[i], err = e.Decode(ctx, seq[i]); err != nil {
				t.Fatal(err)
			}
		}
		compareRows(t, "restored", want[29:len(seq)-1], got[29:len(seq)-1])
	}
}

// TestSyntheticWeights: an engine on generated weights runs, is
// deterministic for a seed and differs between seeds.
func TestSyntheticWeights(t *testing.T) {
	base := open(t, []int{8, 32}, 64)
	p := base.Plan
	run := func(seed uint64) []float32 {
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.SyntheticWeights(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		l, err := e.Prefill(context.Background(), prompt(20, e.Vocab()), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range l {
			if v != v {
				t.Fatal("NaN logits from synthetic weights")
			}
		}
		return l
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave different logits")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same logits")
	}
}
