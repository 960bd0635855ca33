package roofline

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aimaproject/aimac/runtime"
)

// Timer runs fn and returns how long its work took.
type Timer func(fn func() error) (time.Duration, error)

// eventTimer is what a GPU backend offers: fn's work between two events
// on its stream, in device time (runtime/gpu.Backend.Elapsed).
type eventTimer interface {
	Elapsed(fn func() error) (time.Duration, error)
}

// deviceCopier copies between device buffers in stream order
// (runtime/gpu.Backend.Copy).
type deviceCopier interface {
	Copy(dst, src runtime.Ref, n int64) error
}

// TimerFor is the backend's event timer where it has one, else the wall
// clock around fn followed by a Sync (the CPU backend runs synchronously).
func TimerFor(be runtime.Backend) (Timer, string) {
	if t, ok := be.(eventTimer); ok {
		return t.Elapsed, "device events around each launch"
	}
	return func(fn func() error) (time.Duration, error) {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		if err := be.Sync(); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}, "wall clock around each launch"
}

// Copy is a measured copy bandwidth.
type Copy struct {
	Bytes   int64     `json:"bytes"`
	Method  string    `json:"method"`
	RunsS   []float64 `json:"runs_s"`
	MedianS float64   `json:"median_s"`
	// GBs is bytes read plus bytes written per second of the median run, in
	// 10⁹ bytes: the rate a step's reads and writes are held to.
	GBs float64 `json:"gb_s"`
}

// MeasureCopy times repeats copies of n bytes: device to device timed with
// the backend's events where it has both (a GPU), else a host copy timed
// with the wall clock. One untimed copy comes first.
func MeasureCopy(be runtime.Backend, n int64, repeats int) (*Copy, error) {
	if n < 1 || repeats < 1 {
		return nil, fmt.Errorf("copy of %d bytes %d times: want both ≥ 1", n, repeats)
	}
	run, method, done, err := copier(be, n)
	if err != nil {
		return nil, err
	}
	defer done()
	c := &Copy{Bytes: n, Method: method}
	for i := range repeats + 1 {
		d, err := run()
		if err != nil {
			return nil, fmt.Errorf("copy of %d bytes: %w", n, err)
		}
		if i > 0 {
			c.RunsS = append(c.RunsS, d.Seconds())
		}
	}
	c.MedianS = median(c.RunsS)
	if c.MedianS <= 0 {
		return nil, errors.New("copy timed at zero seconds: no bandwidth to report")
	}
	c.GBs = 2 * float64(n) / c.MedianS / 1e9
	return c, nil
}

func copier(be runtime.Backend, n int64) (run func() (time.Duration, error), method string, done func(), err error) {
	cp, okc := be.(deviceCopier)
	t, okt := be.(eventTimer)
	if !okc || !okt {
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i * 131) // not zeros: nothing may shortcut the copy
		}
		return func() (time.Duration, error) {
			start := time.Now()
			copy(dst, src)
			return time.Since(start), nil
		}, "host copy, wall clock", func() {}, nil
	}
	src, err := be.Alloc(n)
	if err != nil {
		return nil, "", nil, fmt.Errorf("allocate the copy's source (%d bytes): %w", n, err)
	}
	dst, err := be.Alloc(n)
	if err != nil {
		be.Free(src)
		return nil, "", nil, fmt.Errorf("allocate the copy's destination (%d bytes): %w", n, err)
	}
	done = func() { be.Free(src); be.Free(dst) }
	if err := be.Zero(runtime.Ref{Mem: src}, n); err != nil {
		done()
		return nil, "", nil, err
	}
	return func() (time.Duration, error) {
		return t.Elapsed(func() error { return cp.Copy(runtime.Ref{Mem: dst}, runtime.Ref{Mem: src}, n) })
	}, "device-to-device copy, device events", done, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// Family is one kernel family's share of a profiled decode step.
type Family struct {
	Family string `json:"family"`
	// Launches is the family's launches in one step.
	Launches int `json:"launches"`
	// US is its time per step in µs (the mean over the profiled steps).
	US float64 `json:"us_per_step"`
	// Share is US over the sum of every family's.
	Share float64 `json:"share"`
	Bytes Bytes   `json:"bytes"`
	// BytesTotal is Bytes.Total().
	BytesTotal int64 `json:"bytes_total"`
	// GBs is its bytes per second of its time (10⁹ bytes).
	GBs float64 `json:"gb_s"`
}

// Profile aggregates profiled steps by family: steps[i] are the bytes of
// step i, times[i] each of its launches' time in launch order. Families come
// in order of time, the longest first.
func Profile(steps []*Step, times [][]time.Duration) ([]Family, error) {
	if len(steps) == 0 || len(steps) != len(times) {
		return nil, fmt.Errorf("%d steps with %d timings: want as many, at least one", len(steps), len(times))
	}
	idx := map[string]int{}
	var out []Family
	var bytes []Bytes
	for i, s := range steps {
		if len(times[i]) != len(s.Launches) {
			return nil, fmt.Errorf("step %d: %d launch times for %d launches", i, len(times[i]), len(s.Launches))
		}
		for j, l := range s.Launches {
			at, ok := idx[l.Family]
			if !ok {
				at = len(out)
				idx[l.Family] = at
				out = append(out, Family{Family: l.Family})
				bytes = append(bytes, Bytes{})
			}
			if i == 0 {
				out[at].Launches++
			}
			out[at].US += times[i][j].Seconds() * 1e6
			bytes[at] = bytes[at].Add(l.Bytes)
		}
	}
	n := float64(len(steps))
	var sum float64
	for i := range out {
		out[i].US /= n
		// The bytes per step: the mean of the steps' (only the KV grows).
		out[i].Bytes = Bytes{Weights: bytes[i].Weights / int64(n), KV: bytes[i].KV / int64(n), State: bytes[i].State / int64(n)}
		out[i].BytesTotal = out[i].Bytes.Total()
		sum += out[i].US
	}
	for i := range out {
		if sum > 0 {
			out[i].Share = out[i].US / sum
		}
		if out[i].US > 0 {
			out[i].GBs = float64(out[i].Bytes.Total()) / out[i].US / 1e3
		}
	}
	slices.SortStableFunc(out, func(a, b Family) int {
		switch {
		case a.US > b.US:
			return -1
		case a.US < b.US:
			return 1
		}
		return 0
	})
	return out, nil
}
