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
		if _, err := e.Restore(snap); err != nil {
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
		if _, err := e.Restore(s); err != nil {
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
	if _, err := e.Restore(a); !errors.Is(err, runtime.ErrReleased) {
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

// snapBytes is what a snapshot at pos holds: the KV rows of pos tokens and
// every state, from the plan.
func snapBytes(e *runtime.Engine, pos int) (kv, state int64) {
	for _, b := range e.Plan().Buffers {
		switch b.Role {
		case "kv":
			kv += int64(pos) * (b.Bytes / b.Shape[0])
		case "state":
			state += b.Bytes
		}
	}
	return kv, state
}

// TestRestoreAdoptsHeldRows: a snapshot taken from the current sequence
// (an exact repeat, a conversation's next turn) restores its states only —
// the KV cache still holds its rows — in either tier; a snapshot whose rows
// were rewound past (another sequence, a shorter restore followed by other
// tokens, a reset) is copied whole. Every continuation is bit for bit the
// one of a run without snapshots.
func TestRestoreAdoptsHeldRows(t *testing.T) {
	for _, tier := range []runtime.Tier{runtime.TierDevice, runtime.TierHost} {
		t.Run(string(tier), func(t *testing.T) {
			l := open(t, []int{8, 32}, 256)
			e := l.Engine
			ctx := context.Background()
			if tier == runtime.TierDevice {
				if err := e.SetSnapshotDeviceBytes(1 << 30); err != nil {
					t.Fatal(err)
				}
			}
			seq := prompt(60, e.Vocab())
			other := prompt(60, 11)
			// continuation decodes seq[from:from+5] and returns their logits.
			continuation := func(from int) [][]float32 {
				t.Helper()
				var out [][]float32
				for _, tok := range seq[from : from+5] {
					l, err := e.Decode(ctx, tok)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, l)
				}
				return out
			}
			// fresh prefills seq up to each end in turn, as the snapshots
			// below are taken (the same segments: the same bits), and
			// decodes on from the last.
			fresh := func(ends ...int) [][]float32 {
				t.Helper()
				if err := e.Reset(); err != nil {
					t.Fatal(err)
				}
				pos := 0
				for _, end := range ends {
					if _, err := e.Prefill(ctx, seq[pos:end], nil); err != nil {
						t.Fatal(err)
					}
					pos = end
				}
				return continuation(pos)
			}
			want30, want40 := fresh(30), fresh(30, 40)

			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			last, err := e.Prefill(ctx, seq[:30], nil)
			if err != nil {
				t.Fatal(err)
			}
			s30, err := e.Snapshot(last)
			if err != nil {
				t.Fatal(err)
			}
			if last, err = e.Prefill(ctx, seq[30:40], nil); err != nil {
				t.Fatal(err)
			}
			s40, err := e.Snapshot(last)
			if err != nil {
				t.Fatal(err)
			}
			if got := map[bool]runtime.Tier{true: runtime.TierDevice, false: runtime.TierHost}[s30.DeviceBytes() > 0]; got != tier {
				t.Fatalf("snapshot in the %s tier, want %s", got, tier)
			}
			kv30, state := snapBytes(e, 30)
			kv40, _ := snapBytes(e, 40)
			restore := func(what string, s *runtime.Snapshot, want runtime.Restored, cont [][]float32) {
				t.Helper()
				got, err := e.Restore(s)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: restored (-want +got):\n%s", what, diff)
				}
				if diff := cmp.Diff(cont, continuation(s.Position())); diff != "" {
					t.Errorf("%s: the continuation differs from a run without snapshots (-want +got):\n%s", what, diff)
				}
			}
			restore("s40 right after it was taken", s40, runtime.Restored{Tier: tier, Copied: state, Adopted: kv40}, want40)
			restore("s30 after s40's continuation", s30, runtime.Restored{Tier: tier, Copied: state, Adopted: kv30}, want30)
			// Other tokens at rows 30 and past: s40's rows are gone, s30's stay.
			if _, err := e.Restore(s30); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Prefill(ctx, other[:12], nil); err != nil {
				t.Fatal(err)
			}
			restore("s40 after rows past 30 were rewritten", s40, runtime.Restored{Tier: tier, Copied: state + kv40}, want40)
			restore("s40 again", s40, runtime.Restored{Tier: tier, Copied: state, Adopted: kv40}, want40)
			// s40 was copied in: the engine knows it holds s40's rows, not
			// that s30's are their prefix.
			restore("s30 after s40 was copied in", s30, runtime.Restored{Tier: tier, Copied: state + kv30}, want30)

			// Another sequence from the start: neither is held.
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Prefill(ctx, other[:45], nil); err != nil {
				t.Fatal(err)
			}
			restore("s30 after another sequence", s30, runtime.Restored{Tier: tier, Copied: state + kv30}, want30)
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			restore("s40 after a reset", s40, runtime.Restored{Tier: tier, Copied: state + kv40}, want40)
		})
	}
}
