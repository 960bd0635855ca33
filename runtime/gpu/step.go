package gpu

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"github.com/aimaproject/aimac/runtime"
)

// stepGraph is a captured step (runtime.StepGraph): one pinned block holds
// the parameter block the graph's first copy reads, the input its second
// copy reads and the result its last copy writes; done is recorded after
// each replay.
type stepGraph struct {
	*graph
	pinned      unsafe.Pointer
	inBytes     int64
	outBytes    int64
	done        uintptr
	outstanding bool // a replay was started and not waited for
}

var _ runtime.StepGrapher = (*Backend)(nil)

// CaptureStep records a step as one graph: inBytes bytes copied to in and
// the parameter block copied to the device block, both from pinned host
// memory, fn's launches, then outBytes bytes of out copied into pinned host
// memory. The graph reads the pinned buffers when it runs, so a replay's
// values are the ones Start wrote.
func (b *Backend) CaptureStep(fn func() error, in runtime.Ref, inBytes int64, out runtime.Ref, outBytes int64) (runtime.StepGraph, error) {
	if inBytes < 0 || outBytes < 1 {
		return nil, fmt.Errorf("%s: a step of %d input and %d result bytes: want ≥ 0 and ≥ 1", b.d.Dialect, inBytes, outBytes)
	}
	var inDev uint64
	if inBytes > 0 {
		p, err := b.device(in, inBytes)
		if err != nil {
			return nil, fmt.Errorf("step input: %w", err)
		}
		inDev = p
	}
	outDev, err := b.device(out, outBytes)
	if err != nil {
		return nil, fmt.Errorf("step result: %w", err)
	}
	s := &stepGraph{inBytes: inBytes, outBytes: outBytes}
	unlock := b.enter()
	if err := b.ready(false); err != nil {
		unlock()
		return nil, err
	}
	d := b.d
	size := uint64(paramBytes) + uint64(inBytes) + uint64(outBytes)
	if rc := d.HostAlloc(&s.pinned, size, 0); rc != 0 {
		unlock()
		return nil, b.fail(fmt.Sprintf("pin the step's %d host bytes", size), rc)
	}
	if rc := d.EventCreate(&s.done, eventDisableTiming); rc != 0 {
		d.HostFree(s.pinned)
		unlock()
		return nil, b.fail("create the step's event", rc)
	}
	unlock()
	free := func() { d.EventDestroy(s.done); d.HostFree(s.pinned) }
	params, inHost, outHost := s.pinned, unsafe.Add(s.pinned, paramBytes), unsafe.Add(s.pinned, uint64(paramBytes)+uint64(inBytes))
	pre := func() (int32, string) {
		if rc := d.MemcpyHtoDAsync(b.block, params, paramBytes, b.stream); rc != 0 {
			return rc, "capture the parameter block's copy"
		}
		if inBytes > 0 {
			if rc := d.MemcpyHtoDAsync(inDev, inHost, uint64(inBytes), b.stream); rc != 0 {
				return rc, "capture the step input's copy"
			}
		}
		return 0, ""
	}
	post := func() (int32, string) {
		if rc := d.MemcpyDtoHAsync(outHost, outDev, uint64(outBytes), b.stream); rc != 0 {
			return rc, "capture the step result's copy"
		}
		return 0, ""
	}
	g, err := b.capture(pre, fn, post)
	if err != nil {
		unlock := b.enter()
		if !b.closed {
			free()
		}
		unlock()
		return nil, err
	}
	g.onDestroy = free
	s.graph = g
	return s, nil
}

// Start fills the pinned buffers and enqueues one replay and the event
// after it.
func (s *stepGraph) Start(p *runtime.Params, in []byte) error {
	b := s.b
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	if s.exec == 0 {
		return fmt.Errorf("%s: start of a destroyed step graph", b.d.Dialect)
	}
	if b.capturing {
		return fmt.Errorf("%s: step graph started during a capture", b.d.Dialect)
	}
	if int64(len(in)) != s.inBytes {
		return fmt.Errorf("%s: a step input of %d bytes, the graph copies %d", b.d.Dialect, len(in), s.inBytes)
	}
	if s.outstanding {
		// The last replay may still read the buffers about to be refilled.
		if rc := b.d.EventSynchronize(s.done); rc != 0 {
			return b.async("wait for the last step", rc)
		}
		s.outstanding = false
	}
	copy(unsafe.Slice((*byte)(s.pinned), paramBytes), unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), paramBytes))
	goruntime.KeepAlive(p)
	copy(unsafe.Slice((*byte)(unsafe.Add(s.pinned, paramBytes)), s.inBytes), in)
	if rc := b.d.GraphLaunch(s.exec, b.stream); rc != 0 {
		return b.fail(fmt.Sprintf("step graph launch (%d kernels)", s.nodes), rc)
	}
	b.last = fmt.Sprintf("a step graph of %d kernels", s.nodes)
	if rc := b.d.EventRecord(s.done, b.stream); rc != 0 {
		return b.fail("record the step's event", rc)
	}
	s.outstanding = true
	return nil
}

// Wait waits for the event after the last replay, then copies its result.
func (s *stepGraph) Wait(dst []byte) error {
	b := s.b
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	if int64(len(dst)) != s.outBytes {
		return fmt.Errorf("%s: a step result of %d bytes, the graph copies %d", b.d.Dialect, len(dst), s.outBytes)
	}
	if !s.outstanding {
		return fmt.Errorf("%s: wait for a step that was not started", b.d.Dialect)
	}
	s.outstanding = false
	if rc := b.d.EventSynchronize(s.done); rc != 0 {
		return b.async("wait for the step", rc)
	}
	copy(dst, unsafe.Slice((*byte)(unsafe.Add(s.pinned, uint64(paramBytes)+uint64(s.inBytes))), s.outBytes))
	return nil
}
