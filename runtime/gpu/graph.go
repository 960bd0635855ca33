package gpu

import (
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/aimaproject/aimac/runtime"
)

// graph is an instantiated graph.
type graph struct {
	b     *Backend
	g     uintptr
	exec  uintptr
	nodes int
	// onDestroy frees what a step graph holds besides the graph (b.mu held).
	onDestroy func()
}

// Capture records the launches fn makes on the backend's streams into a
// graph and instantiates it. Nothing runs during capture; copies,
// memsets, parameter writes and syncs are refused until it ends. Kernel
// arguments are recorded by value: what changes between replays lives in
// device memory (the parameter block).
func (b *Backend) Capture(fn func() error) (runtime.Graph, error) {
	g, err := b.capture(nil, fn, nil)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// capture is Capture with copies recorded before and after fn's launches:
// pre and post run with b.mu held and the stream capturing, and return a
// driver call's result and what it was.
func (b *Backend) capture(pre func() (int32, string), fn func() error, post func() (int32, string)) (*graph, error) {
	// A thread-local capture must end on the thread that began it: the
	// goroutine stays on its OS thread from begin to end (enter's own
	// lock nests inside this one).
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	unlock := b.enter()
	if err := b.ready(false); err != nil {
		unlock()
		return nil, err
	}
	if b.capturing {
		unlock()
		return nil, fmt.Errorf("%s: capture already in progress", b.d.Dialect)
	}
	if rc := b.d.StreamBeginCapture(b.stream, captureThreadLocal); rc != 0 {
		unlock()
		return nil, b.fail("begin capture", rc)
	}
	b.capturing, b.captured = true, 0
	var ferr error
	if pre != nil {
		if rc, what := pre(); rc != 0 {
			ferr = b.fail(what, rc)
		}
	}
	unlock()

	if ferr == nil {
		ferr = fn()
	}

	unlock = b.enter()
	defer unlock()
	if b.closed {
		return nil, b.errClosed
	}
	if ferr == nil && post != nil {
		if rc, what := post(); rc != 0 {
			ferr = b.fail(what, rc)
		}
	}
	b.capturing = false
	var g uintptr
	rc := b.d.StreamEndCapture(b.stream, &g)
	if ferr != nil || rc != 0 {
		if g != 0 {
			b.d.GraphDestroy(g)
		}
		if ferr != nil {
			return nil, ferr
		}
		return nil, b.fail("end capture", rc)
	}
	var exec uintptr
	if rc := b.d.GraphInstantiate(&exec, g, 0); rc != 0 {
		b.d.GraphDestroy(g)
		return nil, b.fail("instantiate the graph", rc)
	}
	gr := &graph{b: b, g: g, exec: exec, nodes: b.captured}
	b.graphs[gr] = struct{}{}
	return gr, nil
}

// Replay enqueues the graph on the backend's stream.
func (g *graph) Replay() error {
	b := g.b
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	if g.exec == 0 {
		return fmt.Errorf("%s: replay of a destroyed graph", b.d.Dialect)
	}
	if b.capturing {
		return fmt.Errorf("%s: graph replayed during a capture", b.d.Dialect)
	}
	if rc := b.d.GraphLaunch(g.exec, b.stream); rc != 0 {
		return b.fail(fmt.Sprintf("graph launch (%d kernels)", g.nodes), rc)
	}
	b.last = fmt.Sprintf("a graph of %d kernels", g.nodes)
	return nil
}

// Destroy frees the graph; it may be called more than once, and after the
// backend's Close (which destroys every graph left).
func (g *graph) Destroy() {
	unlock := g.b.enter()
	defer unlock()
	if !g.b.closed {
		g.destroy()
	}
}

// destroy frees the graph; b.mu is held.
func (g *graph) destroy() {
	if g.exec != 0 {
		g.b.d.GraphExecDestroy(g.exec)
		g.b.d.GraphDestroy(g.g)
	}
	g.exec, g.g = 0, 0
	if g.onDestroy != nil {
		g.onDestroy()
		g.onDestroy = nil
	}
	delete(g.b.graphs, g)
}

// Elapsed runs fn, which must only launch (or replay graphs), between two
// timing events on the backend's stream and returns the device time
// between them: the GPU time of fn's work, without the host's.
func (b *Backend) Elapsed(fn func() error) (time.Duration, error) {
	unlock := b.enter()
	if err := b.ready(true); err != nil {
		unlock()
		return 0, err
	}
	d := b.d
	var start, end uintptr
	if rc := d.EventCreate(&start, eventBlockingSync); rc != 0 {
		unlock()
		return 0, b.fail("create a timing event", rc)
	}
	if rc := d.EventCreate(&end, eventBlockingSync); rc != 0 {
		d.EventDestroy(start)
		unlock()
		return 0, b.fail("create a timing event", rc)
	}
	defer func() {
		unlock := b.enter()
		if !b.closed {
			d.EventDestroy(start)
			d.EventDestroy(end)
		}
		unlock()
	}()
	rc := d.EventRecord(start, b.stream)
	unlock()
	if rc != 0 {
		return 0, b.fail("record a timing event", rc)
	}
	if err := fn(); err != nil {
		return 0, err
	}
	unlock = b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return 0, err
	}
	if rc := d.EventRecord(end, b.stream); rc != 0 {
		return 0, b.fail("record a timing event", rc)
	}
	if rc := d.EventSynchronize(end); rc != 0 {
		return 0, b.async("wait for a timing event", rc)
	}
	var ms float32
	if rc := d.EventElapsedTime(&ms, start, end); rc != 0 {
		return 0, b.fail("elapsed time", rc)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Marks runs fn, which enqueues work and calls mark between the pieces it
// wants timed, and returns the device time between each mark and the next
// (one fewer than the marks). Nothing waits between marks: the pieces run
// back to back as the stream gets them, so the times are the device's own
// only while the host stays ahead of it (enqueue long work before the first
// piece for that). fn may synchronize; Marks waits for the last mark.
func (b *Backend) Marks(fn func(mark func() error) error) ([]time.Duration, error) {
	d := b.d
	var events []uintptr
	defer func() {
		unlock := b.enter()
		if !b.closed {
			for _, ev := range events {
				d.EventDestroy(ev)
			}
		}
		unlock()
	}()
	mark := func() error {
		unlock := b.enter()
		defer unlock()
		if err := b.ready(true); err != nil {
			return err
		}
		var ev uintptr
		if rc := d.EventCreate(&ev, eventBlockingSync); rc != 0 {
			return b.fail("create a timing event", rc)
		}
		events = append(events, ev)
		if rc := d.EventRecord(ev, b.stream); rc != 0 {
			return b.fail("record a timing event", rc)
		}
		return nil
	}
	if err := fn(mark); err != nil {
		return nil, err
	}
	unlock := b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	if rc := d.EventSynchronize(events[len(events)-1]); rc != 0 {
		return nil, b.async("wait for a timing event", rc)
	}
	out := make([]time.Duration, len(events)-1)
	for i := range out {
		var ms float32
		if rc := d.EventElapsedTime(&ms, events[i], events[i+1]); rc != 0 {
			return nil, b.fail("elapsed time", rc)
		}
		out[i] = time.Duration(float64(ms) * float64(time.Millisecond))
	}
	return out, nil
}

// GraphTiming reports whether the driver records events as graph nodes
// (GraphMarks).
func (b *Backend) GraphTiming() bool { return b.d.EventRecordWithFlags != nil }

// GraphMarks captures the launches fn enqueues into a graph with a timing
// event recorded as a node wherever fn calls mark, replays it once and
// returns the device time between each mark and the next (one fewer than
// the marks): times inside one replay, with no host in between. fn must
// only launch, as Capture's. Marks between launches serialize them fully,
// so programmatic dependent launch does not overlap them here.
func (b *Backend) GraphMarks(fn func(mark func() error) error) ([]time.Duration, error) {
	d := b.d
	if d.EventRecordWithFlags == nil {
		return nil, fmt.Errorf("%s: timing inside a graph needs event-record nodes, which this driver does not have", d.Dialect)
	}
	var events []uintptr
	defer func() {
		unlock := b.enter()
		if !b.closed {
			for _, ev := range events {
				d.EventDestroy(ev)
			}
		}
		unlock()
	}()
	mark := func() error {
		unlock := b.enter()
		defer unlock()
		if err := b.ready(false); err != nil {
			return err
		}
		var ev uintptr
		if rc := d.EventCreate(&ev, 0); rc != 0 {
			return b.fail("create a timing event", rc)
		}
		events = append(events, ev)
		if rc := d.EventRecordWithFlags(ev, b.stream, eventRecordExternal); rc != 0 {
			return b.fail("record a timing node", rc)
		}
		return nil
	}
	g, err := b.capture(nil, func() error { return fn(mark) }, nil)
	if err != nil {
		return nil, err
	}
	defer g.Destroy()
	if err := g.Replay(); err != nil {
		return nil, err
	}
	if err := b.Sync(); err != nil {
		return nil, err
	}
	unlock := b.enter()
	defer unlock()
	if len(events) == 0 {
		return nil, nil
	}
	out := make([]time.Duration, len(events)-1)
	for i := range out {
		var ms float32
		if rc := d.EventElapsedTime(&ms, events[i], events[i+1]); rc != 0 {
			return nil, b.fail("elapsed time", rc)
		}
		out[i] = time.Duration(float64(ms) * float64(time.Millisecond))
	}
	return out, nil
}
