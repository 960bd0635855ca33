package runtime

import (
	"context"
	"errors"
	"sync"
)

// An engine owns its memory until its worker has returned: every operation
// that touches backend memory runs as one step under the engine's step
// lock, and Close cancels the running step, waits for it to return, and
// only then frees. Without that, a Close during a launch frees (or unmaps)
// what the launch is reading.

// ErrClosed reports use of an engine after Close.
var ErrClosed = errors.New("engine is closed")

// Interruptible is implemented by backends whose long launches can stop
// part way: the CPU backend checks between row blocks of its reference
// kernels, so that a cancelled step or a Close does not wait for a whole
// launch. GPU launches are short and asynchronous: the engine checks
// between them.
type Interruptible interface {
	// SetInterrupt gives the backend the check it calls inside long
	// launches; a non-nil error abandons the launch with that error.
	SetInterrupt(check func() error)
}

// lifetime is the engine's step lock and closed state.
type lifetime struct {
	steps  sync.Mutex // held by the running step; Close takes it to wait
	mu     sync.Mutex // guards closed and cancel
	closed bool
	cancel context.CancelCauseFunc // the running step's
	// step is the running step's context, which the backend's interrupt
	// check reads on the step's own goroutine.
	step context.Context
}

// begin starts a step: it waits for the one running (the engine serves one
// sequence at a time), fails once the engine is closed, and returns the
// step's context — ctx, also cancelled by Close — and the end to call when
// the step is over.
func (e *Engine) begin(ctx context.Context) (context.Context, func(), error) {
	e.life.steps.Lock()
	e.life.mu.Lock()
	if e.life.closed {
		e.life.mu.Unlock()
		e.life.steps.Unlock()
		return nil, nil, ErrClosed
	}
	sctx, cancel := context.WithCancelCause(ctx)
	e.life.cancel = cancel
	e.life.mu.Unlock()
	e.life.step = sctx
	return sctx, func() {
		e.life.mu.Lock()
		e.life.cancel = nil
		e.life.mu.Unlock()
		e.life.step = nil
		cancel(nil)
		e.life.steps.Unlock()
	}, nil
}

// interrupted is the backend's interrupt check: the running step's
// cancellation, with Close's ErrClosed as its cause.
func (e *Engine) interrupted() error {
	if c := e.life.step; c != nil && c.Err() != nil {
		return context.Cause(c)
	}
	return nil
}

// shut marks the engine closed, cancels the running step and waits for it
// to return; after it no step runs and none will start.
func (e *Engine) shut() (first bool) {
	e.life.mu.Lock()
	first = !e.life.closed
	e.life.closed = true
	if e.life.cancel != nil {
		e.life.cancel(ErrClosed)
	}
	e.life.mu.Unlock()
	e.life.steps.Lock() // the running step has returned
	e.life.steps.Unlock()
	return first
}
