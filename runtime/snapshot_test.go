package runtime_test

import (
	"context"
	"testing"
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
