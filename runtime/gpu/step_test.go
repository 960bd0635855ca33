package gpu

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/runtime"
)

// TestCaptureStep: a step graph copies the parameter block and the input
// from pinned memory as its first nodes and the result into pinned memory
// as its last; each Start's values are the ones its replay reads, the
// result is read when the replay runs, and nothing but the graph launch
// and the event is enqueued per step (no synchronous copy).
func TestCaptureStep(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			var args [][]runtime.Ref
			for i := range ks[:2] {
				args = append(args, operands(t, b, &ks[i]))
			}
			launchAll := func() error {
				for i := range ks[:2] {
					if err := b.Launch(&ks[i], &ls[i], args[i], 1, nil); err != nil {
						return err
					}
				}
				return nil
			}
			in, err := b.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			out, err := b.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			p := dialect + ": "
			_, err = b.CaptureStep(launchAll, runtime.Ref{Mem: in}, 4, runtime.Ref{Mem: out, Offset: 60}, 8)
			wantErr(t, "result past the buffer", err, p+"8 bytes at offset 60 overrun a 64-byte buffer")
			_, err = b.CaptureStep(launchAll, runtime.Ref{Mem: in}, 4, runtime.Ref{Mem: out}, 0)
			wantErr(t, "no result", err, "want ≥ 0 and ≥ 1")
			stop := errors.New("stop")
			_, err = b.CaptureStep(func() error { return stop }, runtime.Ref{Mem: in}, 4, runtime.Ref{Mem: out}, 8)
			if !errors.Is(err, stop) {
				t.Errorf("failed capture: %v", err)
			}
			f.failNext("MemcpyDtoHAsync", 1, 1)
			_, err = b.CaptureStep(launchAll, runtime.Ref{Mem: in}, 4, runtime.Ref{Mem: out}, 8)
			wantErr(t, "result copy fails", err, p+"capture the step result's copy")
			if live := f.live(); live["host"] != 1 || live["graph"] != 0 || live["event"] != 2 {
				t.Errorf("after failed captures: %v (want the argument block and the fork and join events only)", live)
			}
			g, err := b.CaptureStep(launchAll, runtime.Ref{Mem: in}, 4, runtime.Ref{Mem: out}, 8)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := f.launches(); len(got) != 0 {
				t.Errorf("captured launches ran: %v", got)
			}
			wantErr(t, "wait before start", g.Wait(make([]byte, 8)), p+"wait for a step that was not started")
			wantErr(t, "input size", g.Start(&runtime.Params{}, []byte{1}), p+"a step input of 1 bytes, the graph copies 4")

			result := func(v uint64) {
				var r [8]byte
				binary.LittleEndian.PutUint64(r[:], v)
				if err := b.Upload(runtime.Ref{Mem: out}, r[:]); err != nil {
					t.Fatal(err)
				}
			}
			token := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
			sync0 := f.calls["MemcpyHtoD"] + f.calls["MemcpyDtoH"]
			var want []ran
			for step, pos := range []int32{5, 9, 2} {
				result(uint64(1000 + step))
				sync0 = f.calls["MemcpyHtoD"] + f.calls["MemcpyDtoH"]
				var prm runtime.Params
				prm[ir.ParamPos] = pos
				if err := g.Start(&prm, token(uint32(40+step))); err != nil {
					t.Fatal(err)
				}
				prm[ir.ParamPos] = -1 // Start copied the block
				got := make([]byte, 8)
				wantErr(t, "result size", g.Wait(make([]byte, 4)), p+"a step result of 4 bytes, the graph copies 8")
				if err := g.Start(&runtime.Params{ir.ParamPos: pos}, token(uint32(40+step))); err != nil {
					t.Fatal(err) // a second Start waits for the first replay
				}
				if err := g.Wait(got); err != nil {
					t.Fatal(err)
				}
				if n := f.calls["MemcpyHtoD"] + f.calls["MemcpyDtoH"] - sync0; n != 0 {
					t.Errorf("step %d: %d synchronous copies", step, n)
				}
				if v := binary.LittleEndian.Uint64(got); v != uint64(1000+step) {
					t.Errorf("step %d: result %d, want %d", step, v, 1000+step)
				}
				ids := make([]byte, 4)
				if err := b.Download(ids, runtime.Ref{Mem: in}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, token(uint32(40+step))) {
					t.Errorf("step %d: input %v on the device", step, ids)
				}
				var at runtime.Params
				at[ir.ParamPos] = pos
				for range 2 {
					want = append(want, expect("replay", &ks[0], &ls[0], 2, 1, at), expect("replay", &ks[1], &ls[1], 2+len(args[0]), 1, at))
				}
			}
			if diff := cmp.Diff(want, f.launches()); diff != "" {
				t.Errorf("replays (-want +got):\n%s", diff)
			}
			g.Destroy()
			g.Destroy()
			wantErr(t, "start after Destroy", g.Start(&runtime.Params{}, token(1)), p+"start of a destroyed step graph")
			if live := f.live(); live["host"] != 1 || live["graph"] != 0 || live["exec"] != 0 {
				t.Errorf("after Destroy: %v", live)
			}
			// One left for Close to free.
			if _, err := b.CaptureStep(launchAll, runtime.Ref{Mem: in}, 0, runtime.Ref{Mem: out}, 8); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCaptureStepProgrammatic: launches made with programmatic
// serialization inside a step capture replay with the attribute; the
// graph's copies come first and last.
func TestCaptureStepProgrammatic(t *testing.T) {
	b, f, ks, ls := loaded(t, "cuda")
	args := operands(t, b, &ks[0])
	out, err := b.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	pdl := runtime.LaunchAttrs{ProgrammaticSerialization: true}
	g, err := b.CaptureStep(func() error {
		if err := b.Launch(&ks[0], &ls[0], args, 1, nil); err != nil {
			return err
		}
		return b.WithLaunchAttrs(pdl, func() error { return b.Launch(&ks[0], &ls[0], args, 1, nil) })
	}, runtime.Ref{Mem: out}, 4, runtime.Ref{Mem: out, Offset: 8}, 8)
	if err != nil {
		t.Fatal(err)
	}
	edges := f.graphEdges(g.(*stepGraph).graph)
	wantEdges := []string{"copy <- ", "copy <- copy", "embed <- copy", "embed <- embed", "copy <- embed"}
	if diff := cmp.Diff(wantEdges, edges); diff != "" {
		t.Errorf("graph (-want +got):\n%s", diff)
	}
	if err := g.Start(&runtime.Params{}, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	plain := expect("replay", &ks[0], &ls[0], 2, 1, runtime.Params{})
	programmatic := plain
	programmatic.Programmatic = true
	if diff := cmp.Diff([]ran{plain, programmatic}, f.launches()); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
}

// TestGraphMarks: the marks become event-record nodes between the
// launches of a graph replayed once; the times are between consecutive
// marks; HIP, without event-record nodes, says so.
func TestGraphMarks(t *testing.T) {
	b, f, ks, ls := loaded(t, "cuda")
	args := operands(t, b, &ks[0])
	times, err := b.GraphMarks(func(mark func() error) error {
		for range 3 {
			if err := mark(); err != nil {
				return err
			}
			if err := b.Launch(&ks[0], &ls[0], args, 1, nil); err != nil {
				return err
			}
		}
		return mark()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 3 {
		t.Fatalf("%d times for 4 marks", len(times))
	}
	for i, d := range times {
		if d < 0 {
			t.Errorf("time %d: %v", i, d)
		}
	}
	if n := len(f.launches()); n != 3 {
		t.Errorf("%d launches ran, want the 3 of one replay", n)
	}
	if live := f.live(); live["graph"] != 0 || live["exec"] != 0 || live["event"] != 2 {
		t.Errorf("left after GraphMarks: %v", live)
	}
	stop := errors.New("stop")
	if _, err := b.GraphMarks(func(func() error) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: %v", err)
	}
	h, _, _, _ := loaded(t, "hip")
	_, err = h.GraphMarks(func(func() error) error { return nil })
	wantErr(t, "HIP", err, "hip: timing inside a graph needs event-record nodes")
}
