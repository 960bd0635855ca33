package roofline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/aimaproject/aimac/runtime"
)

// eventTimer is what a GPU backend offers: fn's work between two events
// on its stream, in device time (runtime/gpu.Backend.Elapsed).
type eventTimer interface {
	Elapsed(fn func() error) (time.Duration, error)
}

// marker times pieces of work enqueued back to back (runtime/gpu.Backend.Marks).
type marker interface {
	Marks(fn func(mark func() error) error) ([]time.Duration, error)
}

// graphMarker times pieces of one graph replay (runtime/gpu.Backend.GraphMarks)
// where the device can (GraphTiming).
type graphMarker interface {
	GraphMarks(fn func(mark func() error) error) ([]time.Duration, error)
	GraphTiming() bool
}

// deviceCopier copies between device buffers in stream order
// (runtime/gpu.Backend.Copy).
type deviceCopier interface {
	Copy(dst, src runtime.Ref, n int64) error
}

// Steps is one step to time: it runs its launches through each(i, run),
// which must call run once for launch i (Engine.ProfileDecode's hook).
type Steps func(each func(i int, run func() error) error) error

// GraphSteps is one step to time inside a graph: it hands its launches to
// in (Engine.ProfileDecodeIn's hook), which captures and replays them.
type GraphSteps func(in func(launches runtime.Launches) error) error

// Profiler times every launch of a step on a backend. In graph mode
// (NewGraphProfiler) the step's launches are captured into a graph with a
// timing event recorded as a node after each, and replayed once: each
// launch's time is the device's inside a replay, launch gap included, with
// no host anywhere (the timing nodes do keep launches from overlapping, as
// programmatic dependent launch lets them in the real step). Otherwise, on
// a GPU the launches
// are enqueued back to back with an event after each (Marks) behind a head
// start of device copies, so the host is ahead of the device and each
// launch's time is the device's alone, launch gap included, as in a replayed
// step; the head start grows to twice the host's enqueue time of the step
// before. Elsewhere (the CPU) it is the wall clock around each launch.
type Profiler struct {
	be     runtime.Backend
	marks  marker
	copier deviceCopier
	// src and dst are the head start's buffers of n bytes; one copy takes
	// copyS seconds, heads copies are enqueued before a step.
	src, dst runtime.Mem
	n        int64
	copyS    float64
	heads    int
	// Timing says how launches are timed.
	Timing string
	// Behind counts the steps whose host enqueue outlasted the head start:
	// their small launches may include host time.
	Behind int
	// graph times in graph mode.
	graph graphMarker
}

// NewGraphProfiler is a profiler in graph mode (GraphStep); nil when the
// backend cannot time inside a graph, or, with an error, when a trial
// graph of two timing nodes fails on this device.
func NewGraphProfiler(be runtime.Backend) (*Profiler, error) {
	g, ok := be.(graphMarker)
	if !ok || !g.GraphTiming() {
		return nil, nil
	}
	if _, err := g.GraphMarks(func(mark func() error) error {
		if err := mark(); err != nil {
			return err
		}
		return mark()
	}); err != nil {
		return nil, fmt.Errorf("timing inside a graph: %w", err)
	}
	return &Profiler{be: be, graph: g, Timing: "device events recorded as graph nodes between the launches of one replay of the step"}, nil
}

// Graph reports whether the profiler is in graph mode.
func (p *Profiler) Graph() bool { return p.graph != nil }

// GraphStep runs step in graph mode and returns each launch's time, in
// launch order.
func (p *Profiler) GraphStep(step GraphSteps) ([]time.Duration, error) {
	if p.graph == nil {
		return nil, errors.New("GraphStep on a profiler not in graph mode")
	}
	var out []time.Duration
	launches := 0
	err := step(func(ls runtime.Launches) error {
		ts, err := p.graph.GraphMarks(func(mark func() error) error {
			if err := mark(); err != nil {
				return err
			}
			return ls(func(i int, run func() error) error {
				if i != launches {
					return fmt.Errorf("launch %d timed after %d launches", i, launches)
				}
				launches++
				if err := run(); err != nil {
					return err
				}
				return mark()
			})
		})
		out = ts
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) != launches {
		return nil, fmt.Errorf("%d times for %d launches", len(out), launches)
	}
	return out, nil
}

// headStartS is the first step's head start, ample for a thousand launches.
const headStartS = 0.02

// NewProfiler prepares the profiler; c is the copy measured on be (its size
// and time make the head start on a GPU). Close frees it.
func NewProfiler(be runtime.Backend, c *Copy) (*Profiler, error) {
	p := &Profiler{be: be, Timing: "wall clock around each launch"}
	m, okm := be.(marker)
	cp, okc := be.(deviceCopier)
	if !okm || !okc {
		return p, nil
	}
	if c == nil || c.MedianS <= 0 || c.Bytes < 1 {
		return nil, errors.New("profile on a GPU: no copy measured for the head start")
	}
	src, err := be.Alloc(c.Bytes)
	if err != nil {
		return nil, fmt.Errorf("allocate the head start (%d bytes): %w", c.Bytes, err)
	}
	dst, err := be.Alloc(c.Bytes)
	if err != nil {
		be.Free(src)
		return nil, fmt.Errorf("allocate the head start (%d bytes): %w", c.Bytes, err)
	}
	p.marks, p.copier, p.src, p.dst, p.n, p.copyS = m, cp, src, dst, c.Bytes, c.MedianS
	p.heads = max(1, int(math.Ceil(headStartS/c.MedianS)))
	p.Timing = "device events between launches enqueued back to back behind a head start"
	return p, nil
}

// Close frees the head start's buffers.
func (p *Profiler) Close() {
	if p.src != nil {
		p.be.Free(p.src)
		p.be.Free(p.dst)
		p.src, p.dst = nil, nil
	}
}

// Step runs step and returns each launch's time, in launch order.
func (p *Profiler) Step(step Steps) ([]time.Duration, error) {
	if p.marks == nil {
		return p.wallStep(step)
	}
	var hostStart, hostEnd time.Time
	launches := 0
	marks, err := p.marks.Marks(func(mark func() error) error {
		return step(func(i int, run func() error) error {
			if i != launches {
				return fmt.Errorf("launch %d timed after %d launches", i, launches)
			}
			if i == 0 {
				if err := mark(); err != nil {
					return err
				}
				for range p.heads {
					if err := p.copier.Copy(runtime.Ref{Mem: p.dst}, runtime.Ref{Mem: p.src}, p.n); err != nil {
						return fmt.Errorf("head start: %w", err)
					}
				}
				if err := mark(); err != nil {
					return err
				}
				hostStart = time.Now()
			}
			launches++
			if err := run(); err != nil {
				return err
			}
			err := mark()
			hostEnd = time.Now()
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	if launches == 0 {
		return nil, nil
	}
	if len(marks) != launches+1 {
		return nil, fmt.Errorf("%d times for %d launches and the head start", len(marks), launches)
	}
	host := hostEnd.Sub(hostStart)
	if marks[0] < host {
		p.Behind++
	}
	p.heads = max(p.heads, int(math.Ceil(2*host.Seconds()/p.copyS)))
	return marks[1:], nil
}

func (p *Profiler) wallStep(step Steps) ([]time.Duration, error) {
	var out []time.Duration
	err := step(func(i int, run func() error) error {
		if i != len(out) {
			return fmt.Errorf("launch %d timed after %d launches", i, len(out))
		}
		start := time.Now()
		if err := run(); err != nil {
			return err
		}
		if err := p.be.Sync(); err != nil {
			return err
		}
		out = append(out, time.Since(start))
		return nil
	})
	return out, err
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

// Family is one kernel family's share of a profiled decode step (Profile)
// or of a profiled prefill (ProfileTotal: the prefill is the step).
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
	// FLOPs is its matrix work per step where the family has a FLOP model
	// (Launch.FLOPs), TFLOPs those flops per second of its time (10¹²).
	FLOPs  int64   `json:"flops,omitempty"`
	TFLOPs float64 `json:"tflop_s,omitempty"`
}

// Profile aggregates profiled steps by family: steps[i] are the bytes of
// step i, times[i] each of its launches' time in launch order. Families come
// in order of time, the longest first. Times, bytes and flops are the
// means over the steps, the launches those of the first step.
func Profile(steps []*Step, times [][]time.Duration) ([]Family, error) {
	return aggregate(steps, times, true)
}

// ProfileTotal aggregates the steps of one profiled prefill (its segments,
// and the decode steps of a short last one) by family as Profile does, with
// every step's launches, times, bytes and flops summed: the prefill is the
// step.
func ProfileTotal(steps []*Step, times [][]time.Duration) ([]Family, error) {
	return aggregate(steps, times, false)
}

// aggregate is Profile with mean, ProfileTotal without.
func aggregate(steps []*Step, times [][]time.Duration, mean bool) ([]Family, error) {
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
			if i == 0 || !mean {
				out[at].Launches++
			}
			out[at].US += times[i][j].Seconds() * 1e6
			out[at].FLOPs += l.FLOPs
			bytes[at] = bytes[at].Add(l.Bytes)
		}
	}
	n := int64(1)
	if mean {
		n = int64(len(steps))
	}
	var sum float64
	for i := range out {
		out[i].US /= float64(n)
		out[i].FLOPs /= n
		// The bytes per step: the mean of the steps' (only the KV grows).
		out[i].Bytes = Bytes{Weights: bytes[i].Weights / n, KV: bytes[i].KV / n, State: bytes[i].State / n}
		out[i].BytesTotal = out[i].Bytes.Total()
		sum += out[i].US
	}
	for i := range out {
		if sum > 0 {
			out[i].Share = out[i].US / sum
		}
		if out[i].US > 0 {
			out[i].GBs = float64(out[i].Bytes.Total()) / out[i].US / 1e3
			out[i].TFLOPs = float64(out[i].FLOPs) / out[i].US / 1e6
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
