package cuda

import (
	"errors"
	"fmt"

	"github.com/aimaproject/aimac/runtime"
)

// captureThreadLocal is CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: only unsafe
// calls made by the capturing thread itself invalidate the capture.
const captureThreadLocal = 1

var _ runtime.Grapher = (*CUDA)(nil)

// graph is an instantiated CUDA graph.
type graph struct {
	c     *CUDA
	g     uintptr
	exec  uintptr
	nodes int
}

// Capture records the launches fn makes on the backend's stream into a
// CUDA graph and instantiates it. Nothing runs during capture; copies,
// memsets, parameter writes and syncs are refused until it ends.
func (c *CUDA) Capture(fn func() error) (runtime.Graph, error) {
	unlock := c.enter()
	if c.closed {
		unlock()
		return nil, errClosed
	}
	if c.capturing {
		unlock()
		return nil, errors.New("cuda: capture already in progress")
	}
	if rc := c.d.cuStreamBeginCapture(c.stream, captureThreadLocal); rc != 0 {
		unlock()
		return nil, c.fail("cuStreamBeginCapture", rc)
	}
	c.capturing, c.captured = true, 0
	unlock()

	ferr := fn()

	unlock = c.enter()
	defer unlock()
	c.capturing = false
	var g uintptr
	rc := c.d.cuStreamEndCapture(c.stream, &g)
	if ferr != nil {
		if g != 0 {
			c.d.cuGraphDestroy(g)
		}
		return nil, ferr
	}
	if rc != 0 {
		if g != 0 {
			c.d.cuGraphDestroy(g)
		}
		return nil, c.fail("cuStreamEndCapture", rc)
	}
	var exec uintptr
	if rc := c.d.cuGraphInstantiate(&exec, g, 0); rc != 0 {
		c.d.cuGraphDestroy(g)
		return nil, c.fail("cuGraphInstantiate", rc)
	}
	return &graph{c: c, g: g, exec: exec, nodes: c.captured}, nil
}

// Replay enqueues the graph on the backend's stream.
func (g *graph) Replay() error {
	c := g.c
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if g.exec == 0 {
		return errors.New("cuda: replay of a destroyed graph")
	}
	if c.capturing {
		return errors.New("cuda: graph replayed during a capture")
	}
	if rc := c.d.cuGraphLaunch(g.exec, c.stream); rc != 0 {
		return fmt.Errorf("cuda: graph launch (%d kernels): %s", g.nodes, c.d.errorString(rc))
	}
	c.last = fmt.Sprintf("a graph of %d kernels", g.nodes)
	return nil
}

// Destroy frees the graph; it may be called more than once.
func (g *graph) Destroy() {
	c := g.c
	unlock := c.enter()
	defer unlock()
	if g.exec != 0 && !c.closed {
		c.d.cuGraphExecDestroy(g.exec)
		c.d.cuGraphDestroy(g.g)
	}
	g.exec, g.g = 0, 0
}
