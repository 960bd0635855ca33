package runtime_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestSnapshotDeviceTier: with a device budget snapshots stay in device
// memory (the CPU backend's Copy stands in for a GPU's device copy); the
// least recently used move to host memory when a new one needs the room,
// restored ones count as used, and wherever a snapshot is, restoring it
// continues the sequence exactly. Release frees it and refuses a restore.
func TestSnapshotDeviceTier(t *testing.T) {
	l := open(t, []int{8, 32}, 256)
	e := l.Engine
	ctx := context.Background()
	seq := prompt(60, e.Vocab())
	want := teacherForced(t, e, seq)
	take := func(n int) *runtime.Snapshot {
		t.Helper()
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		last, err := e.Prefill(ctx, seq[:n], nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Snapshot(last)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// check restores s and compares the next position's logits.
	check := func(what string, s *runtime.Snapshot) {
		t.Helper()
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		if err := e.Restore(s); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := s.Position()
		got, err := e.Decode(ctx, seq[n])
		if err != nil {
			t.Fatal(err)
		}
		compareRows(t, what, [][]float32{want[n-1], want[n]}, [][]float32{s.Logits(), got})
	}
	probe := take(20)
	per := probe.Bytes() - int64(4*len(probe.Logits())) // the state of 20 tokens, on the host
	if err := e.SetSnapshotDeviceBytes(3 * per); err != nil {
		t.Fatal(err)
	}
	tier := func(ss ...*runtime.Snapshot) []bool {
		var out []bool
		for _, s := range ss {
			out = append(out, s.DeviceBytes() > 0)
		}
		return out
	}
	a, b := take(20), take(21)
	if diff := cmp.Diff([]bool{false, true, true}, tier(probe, a, b)); diff != "" {
		t.Fatalf("on the device: probe, a, b (-want +got):\n%s", diff)
	}
	if a.Bytes() != int64(4*len(a.Logits())) {
		t.Errorf("a device snapshot holds %d host bytes, want only its logits", a.Bytes())
	}
	check("a on the device", a) // a is now the most recently used
	c := take(22)               // needs room: b, the least recently used, moves to the host
	if diff := cmp.Diff([]bool{true, false, true}, tier(a, b, c)); diff != "" {
		t.Errorf("after c: a, b, c on the device (-want +got):\n%s", diff)
	}
	used, limit := e.SnapshotDevice()
	if used != a.DeviceBytes()+c.DeviceBytes() || limit != 3*per {
		t.Errorf("device tier %d of %d bytes, want %d of %d", used, limit, a.DeviceBytes()+c.DeviceBytes(), 3*per)
	}
	check("b moved to the host", b)
	check("c on the device", c)
	check("the host snapshot", probe)

	a.Release()
	a.Release() // twice is fine
	if err := e.Restore(a); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("restore after release: %v, want ErrReleased", err)
	}
	if used, _ := e.SnapshotDevice(); used != c.DeviceBytes() {
		t.Errorf("after releasing a the tier holds %d bytes, want %d", used, c.DeviceBytes())
	}
	if err := e.SetSnapshotDeviceBytes(0); err != nil {
		t.Fatal(err)
	}
	if c.DeviceBytes() != 0 {
		t.Error("a zero bound left c on the device")
	}
	check("c moved by the lower bound", c)
	if err := e.SetSnapshotDeviceBytes(3 * per); err != nil {
		t.Fatal(err)
	}
	d := take(23)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if d.DeviceBytes() != 0 {
		t.Error("Close left a snapshot on the device")
	}
	d.Release()
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
