package gpu

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/roofline"
	"github.com/aimaproject/aimac/runtime"
)

// TestRoofline runs roofline's measurements on the GPU backend: the copy
// bandwidth is repeats+1 device-to-device copies, each between its own pair
// of events, on buffers it frees again; the profiler enqueues its head
// start, then a launch and a mark at a time, and frees everything.
func TestRoofline(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			live := f.live()
			c, err := roofline.MeasureCopy(b, 1<<20, 3)
			if err != nil {
				t.Fatal(err)
			}
			if c.Method != "device-to-device copy, device events" || c.Bytes != 1<<20 || len(c.RunsS) != 3 || c.GBs <= 0 {
				t.Errorf("copy %+v", c)
			}
			f.mu.Lock()
			copies, records := f.calls["MemcpyDtoDAsync"], f.calls["EventRecord"]
			f.mu.Unlock()
			if copies != 4 || records != 8 {
				t.Errorf("%d copies and %d event records, want 4 and 8", copies, records)
			}
			if d := cmp.Diff(live, f.live()); d != "" {
				t.Errorf("live objects after the copy (-before +after):\n%s", d)
			}
			// A step of three launches behind the head start: one copy per
			// 20 ms of the measured copy's time, then a mark after each.
			var args [][]runtime.Ref
			for i := range ks {
				args = append(args, operands(t, b, &ks[i]))
			}
			live = f.live()
			p, err := roofline.NewProfiler(b, c)
			if err != nil {
				t.Fatal(err)
			}
			if p.Timing != "device events between launches enqueued back to back behind a head start" {
				t.Errorf("timing %q", p.Timing)
			}
			f.mu.Lock()
			before := f.calls["MemcpyDtoDAsync"]
			f.mu.Unlock()
			ts, err := p.Step(func(each func(int, func() error) error) error {
				for i := range ls {
					if err := each(i, func() error { return b.Launch(&ks[i], &ls[i], args[i], 1, nil) }); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil || len(ts) != len(ls) {
				t.Fatalf("times %v, %v", ts, err)
			}
			heads := int(math.Ceil(0.02 / c.MedianS))
			f.mu.Lock()
			started := f.calls["MemcpyDtoDAsync"] - before
			f.mu.Unlock()
			if started != heads {
				t.Errorf("%d copies of head start, want %d", started, heads)
			}
			if n := len(f.launches()); n != len(ls) {
				t.Errorf("%d launches, want %d", n, len(ls))
			}
			p.Close()
			if d := cmp.Diff(live, f.live()); d != "" {
				t.Errorf("live objects after the profile (-before +after):\n%s", d)
			}
		})
	}
}

// TestMarks: n marks give n-1 times; fn's error is returned; the events go
// in every case.
func TestMarks(t *testing.T) {
	b, f, _, _ := loaded(t, "cuda")
	live := f.live()
	ts, err := b.Marks(func(mark func() error) error {
		for range 3 {
			if err := mark(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(ts) != 2 || ts[0] < 0 || ts[1] < 0 {
		t.Errorf("times %v, %v", ts, err)
	}
	if ts, err := b.Marks(func(func() error) error { return nil }); err != nil || len(ts) != 0 {
		t.Errorf("no marks: %v, %v", ts, err)
	}
	stop := errors.New("stop")
	if _, err := b.Marks(func(mark func() error) error { mark(); return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: %v", err)
	}
	f.failNext("EventRecord", 1, 700)
	if _, err := b.Marks(func(mark func() error) error { return mark() }); err == nil {
		t.Error("a failed record: no error")
	}
	if d := cmp.Diff(live, f.live()); d != "" {
		t.Errorf("live objects (-before +after):\n%s", d)
	}
}

// TestGraphProfiler: in graph mode the step's launches are captured with a
// timing node after each and replayed once: one time per launch, every
// launch run once, as a replay, nothing left behind; HIP has no graph
// mode.
func TestGraphProfiler(t *testing.T) {
	b, f, ks, ls := loaded(t, "cuda")
	var args [][]runtime.Ref
	for i := range ks {
		args = append(args, operands(t, b, &ks[i]))
	}
	live := f.live()
	p, err := roofline.NewGraphProfiler(b)
	if err != nil || p == nil || !p.Graph() {
		t.Fatalf("no graph mode on the CUDA backend: %v", err)
	}
	f.launches() // the trial graph's
	launches := func(each func(int, func() error) error) error {
		for i := range ls {
			if err := each(i, func() error { return b.Launch(&ks[i], &ls[i], args[i], 1, nil) }); err != nil {
				return err
			}
		}
		return nil
	}
	ts, err := p.GraphStep(func(in func(runtime.Launches) error) error { return in(launches) })
	if err != nil || len(ts) != len(ls) {
		t.Fatalf("times %v, %v", ts, err)
	}
	var vias []string
	for _, r := range f.launches() {
		vias = append(vias, r.Via+" "+r.Kernel)
	}
	if d := cmp.Diff([]string{"replay embed", "replay norm", "replay residual"}, vias); d != "" {
		t.Errorf("launches (-want +got):\n%s", d)
	}
	if d := cmp.Diff(live, f.live()); d != "" {
		t.Errorf("live objects after the profile (-before +after):\n%s", d)
	}
	stop := errors.New("stop")
	if _, err := p.GraphStep(func(in func(runtime.Launches) error) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("step's error: %v", err)
	}
	h, _, _, _ := loaded(t, "hip")
	if p, err := roofline.NewGraphProfiler(h); p != nil || err != nil {
		t.Errorf("graph mode on HIP, which has no event-record nodes: %v", err)
	}
	f.failNext("EventRecordWithFlags", 1, 1)
	if _, err := roofline.NewGraphProfiler(b); err == nil || !strings.Contains(err.Error(), "timing inside a graph: cuda: record a timing node") {
		t.Errorf("a failing trial: %v", err)
	}
}
