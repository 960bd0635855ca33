package gpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/roofline"
)

// TestRoofline runs roofline's measurements on the GPU backend: the copy
// bandwidth is repeats+1 device-to-device copies, each between its own pair
// of events, on buffers it frees again; the launch timer is Elapsed.
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
			timer, how := roofline.TimerFor(b)
			if how != "device events around each launch" {
				t.Errorf("timing %q", how)
			}
			args := operands(t, b, &ks[0])
			if d, err := timer(func() error { return b.Launch(&ks[0], &ls[0], args, 1, nil) }); err != nil || d < 0 {
				t.Errorf("launch timed %v, %v", d, err)
			}
			if n := len(f.launches()); n != 1 {
				t.Errorf("%d launches, want 1", n)
			}
		})
	}
}
