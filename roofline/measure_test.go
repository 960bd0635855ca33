package roofline

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aimaproject/aimac/runtime"
)

func TestProfile(t *testing.T) {
	step := func(kv int64) *Step {
		return &Step{Launches: []Launch{
			{Family: "matmul", Bytes: Bytes{Weights: 4000}},
			{Family: "attention", Bytes: Bytes{KV: kv}},
			{Family: "matmul", Bytes: Bytes{Weights: 2000}},
			{Family: "add"},
		}}
	}
	us := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Microsecond)
		}
		return out
	}
	got, err := Profile([]*Step{step(1000), step(3000)}, [][]time.Duration{us(2, 4, 1, 1), us(4, 6, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	// Means over the two steps: matmul (2+1, 4+1) → 4 µs, attention 5 µs,
	// add 1 µs, of 10 µs; attention's KV is the mean of 1000 and 3000.
	want := []Family{
		{Family: "attention", Launches: 1, US: 5, Share: 0.5, Bytes: Bytes{KV: 2000}, BytesTotal: 2000, GBs: 0.4},
		{Family: "matmul", Launches: 2, US: 4, Share: 0.4, Bytes: Bytes{Weights: 6000}, BytesTotal: 6000, GBs: 1.5},
		{Family: "add", Launches: 1, US: 1, Share: 0.1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("profile (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		steps   []*Step
		times   [][]time.Duration
		wantErr string
	}{
		{nil, nil, "0 steps with 0 timings"},
		{[]*Step{step(1)}, nil, "1 steps with 0 timings"},
		{[]*Step{step(1)}, [][]time.Duration{us(1, 2)}, "step 0: 2 launch times for 4 launches"},
	} {
		if _, err := Profile(tc.steps, tc.times); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("error %v, want %q", err, tc.wantErr)
		}
	}
}

// TestMeasureCopyHost measures the CPU backend's copy: a host copy timed
// with the wall clock, bytes read + written over the median.
func TestMeasureCopyHost(t *testing.T) {
	c, err := MeasureCopy(runtime.NewCPU(), 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.Method != "host copy, wall clock" || c.Bytes != 1<<20 || len(c.RunsS) != 3 {
		t.Errorf("copy %+v", c)
	}
	if want := 2 * float64(c.Bytes) / c.MedianS / 1e9; c.GBs != want || c.GBs <= 0 {
		t.Errorf("%.3f GB/s, want %.3f from the median %g s", c.GBs, want, c.MedianS)
	}
	for _, bad := range [][2]int64{{0, 1}, {1, 0}} {
		if _, err := MeasureCopy(runtime.NewCPU(), bad[0], int(bad[1])); err == nil {
			t.Errorf("copy of %d bytes %d times: no error", bad[0], bad[1])
		}
	}
}

// TestProfilerCPU: on the CPU each launch is timed with the wall clock,
// in order; a step that skips a launch is refused.
func TestProfilerCPU(t *testing.T) {
	p, err := NewProfiler(runtime.NewCPU(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Timing != "wall clock around each launch" {
		t.Errorf("timing %q", p.Timing)
	}
	ran := 0
	ts, err := p.Step(func(each func(int, func() error) error) error {
		for i := range 3 {
			if err := each(i, func() error { ran++; time.Sleep(time.Duration(i) * time.Millisecond); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || ran != 3 || len(ts) != 3 || ts[2] < 2*time.Millisecond || ts[1] < time.Millisecond {
		t.Errorf("ran %d launches, times %v, %v", ran, ts, err)
	}
	_, err = p.Step(func(each func(int, func() error) error) error { return each(1, func() error { return nil }) })
	if err == nil || !strings.Contains(err.Error(), "launch 1 timed after 0 launches") {
		t.Errorf("skipped launch: %v", err)
	}
}

// TestProfileTotal aggregates a prefill of two segments and a decode step
// of its tail: every launch counted, times, bytes and flops summed, shares
// of the sum, TFLOP/s and GB/s of each family's own time.
func TestProfileTotal(t *testing.T) {
	segment := func(kv int64) *Step {
		return &Step{Launches: []Launch{
			{Family: "gemm", Bytes: Bytes{Weights: 4000}, FLOPs: 6e6},
			{Family: "attention_prefill", Bytes: Bytes{KV: kv}, FLOPs: kv * 1000},
			{Family: "gemm", Bytes: Bytes{Weights: 2000}, FLOPs: 2e6},
			{Family: "add"},
		}}
	}
	decode := &Step{Launches: []Launch{
		{Family: "gemv", Bytes: Bytes{Weights: 6000}, FLOPs: 6000},
		{Family: "add"},
	}}
	us := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Microsecond)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []*Step
		times [][]time.Duration
		want  []Family
	}{
		{
			name:  "one segment",
			steps: []*Step{segment(1000)},
			times: [][]time.Duration{us(3, 5, 1, 1)},
			want: []Family{
				{Family: "attention_prefill", Launches: 1, US: 5, Share: 0.5, Bytes: Bytes{KV: 1000}, BytesTotal: 1000, GBs: 0.2, FLOPs: 1e6, TFLOPs: 0.2},
				{Family: "gemm", Launches: 2, US: 4, Share: 0.4, Bytes: Bytes{Weights: 6000}, BytesTotal: 6000, GBs: 1.5, FLOPs: 8e6, TFLOPs: 2},
				{Family: "add", Launches: 1, US: 1, Share: 0.1},
			},
		},
		{
			// gemm 4+4 µs, attention 5+7, gemv 2, add 1+1+2: 26 µs.
			name:  "two segments and a decode step",
			steps: []*Step{segment(1000), segment(3000), decode},
			times: [][]time.Duration{us(3, 5, 1, 1), us(3, 7, 1, 1), us(2, 2)},
			want: []Family{
				{Family: "attention_prefill", Launches: 2, US: 12, Share: 12.0 / 26, Bytes: Bytes{KV: 4000}, BytesTotal: 4000, GBs: 4000 / 12e3, FLOPs: 4e6, TFLOPs: 4e6 / 12e6},
				{Family: "gemm", Launches: 4, US: 8, Share: 8.0 / 26, Bytes: Bytes{Weights: 12000}, BytesTotal: 12000, GBs: 1.5, FLOPs: 16e6, TFLOPs: 2},
				{Family: "add", Launches: 3, US: 4, Share: 4.0 / 26},
				{Family: "gemv", Launches: 1, US: 2, Share: 2.0 / 26, Bytes: Bytes{Weights: 6000}, BytesTotal: 6000, GBs: 3, FLOPs: 6000, TFLOPs: 0.003},
			},
		},
	} {
		got, err := ProfileTotal(tc.steps, tc.times)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-12)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
	if _, err := ProfileTotal([]*Step{decode}, [][]time.Duration{us(1)}); err == nil || !strings.Contains(err.Error(), "step 0: 1 launch times for 2 launches") {
		t.Errorf("short timing: %v", err)
	}
}
