package hip

import (
	"errors"
	"fmt"

	"github.com/aimaproject/aimac/runtime"
)

var _ runtime.Grapher = (*HIP)(nil)

// graph is an instantiated HIP graph.
type graph struct {
	h     *HIP
	g     uintptr
	exec  uintptr
	nodes int
}

// Capture records the launches fn makes on the backend's stream into a HIP
// graph and instantiates it. Nothing runs during capture; copies, memsets,
// parameter writes and syncs are refused until it ends. Kernel arguments
// are recorded by value: what changes between replays lives in device
// memory (the parameter block).
func (h *HIP) Capture(fn func() error) (runtime.Graph, error) {
	unlock := h.enter()
	if h.closed {
		unlock()
		return nil, errClosed
	}
	if h.capturing {
		unlock()
		return nil, errors.New("hip: capture already in progress")
	}
	if rc := h.a.hipStreamBeginCapture(h.stream, captureThreadLocal); rc != 0 {
		unlock()
		return nil, h.fail("hipStreamBeginCapture", rc)
	}
	h.capturing, h.captured = true, 0
	unlock()

	ferr := fn()

	unlock = h.enter()
	defer unlock()
	h.capturing = false
	var g uintptr
	rc := h.a.hipStreamEndCapture(h.stream, &g)
	if ferr != nil {
		if g != 0 {
			h.a.hipGraphDestroy(g)
		}
		return nil, ferr
	}
	if rc != 0 {
		if g != 0 {
			h.a.hipGraphDestroy(g)
		}
		return nil, h.fail("hipStreamEndCapture", rc)
	}
	var exec uintptr
	var log [512]byte
	if rc := h.a.hipGraphInstantiate(&exec, g, nil, &log[0], uintptr(len(log))); rc != 0 {
		h.a.hipGraphDestroy(g)
		if msg := cString(log[:]); msg != "" {
			return nil, fmt.Errorf("hip: hipGraphInstantiate: %s: %s", h.a.errorString(rc), msg)
		}
		return nil, h.fail("hipGraphInstantiate", rc)
	}
	gr := &graph{h: h, g: g, exec: exec, nodes: h.captured}
	h.graphs[gr] = struct{}{}
	return gr, nil
}

// Replay enqueues the graph on the backend's stream.
func (g *graph) Replay() error {
	h := g.h
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if g.exec == 0 {
		return errors.New("hip: replay of a destroyed graph")
	}
	if h.capturing {
		return errors.New("hip: graph replayed during a capture")
	}
	if rc := h.a.hipGraphLaunch(g.exec, h.stream); rc != 0 {
		return fmt.Errorf("hip: graph launch (%d kernels): %s", g.nodes, h.a.errorString(rc))
	}
	h.last = fmt.Sprintf("a graph of %d kernels", g.nodes)
	return nil
}

// Destroy frees the graph; it may be called more than once, and after the
// backend's Close (which destroys every graph left).
func (g *graph) Destroy() {
	h := g.h
	unlock := h.enter()
	defer unlock()
	if !h.closed {
		g.destroy()
	}
}

// destroy frees the graph; h.mu is held.
func (g *graph) destroy() {
	if g.exec != 0 {
		g.h.a.hipGraphExecDestroy(g.exec)
		g.h.a.hipGraphDestroy(g.g)
	}
	g.exec, g.g = 0, 0
	delete(g.h.graphs, g)
}
