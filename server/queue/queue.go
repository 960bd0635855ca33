// Package queue is the server's scheduler: one engine worker, fed by a
// bounded first-in-first-out queue of requests.
//
// The engine decodes one sequence at a time (batch size one), so every
// request that needs the model holds a Ticket. A request first calls Admit,
// which either reserves one of Depth waiting places or fails at once (the
// server answers 429 or 503 before any response header is sent). Wait then
// blocks until every ticket admitted earlier has run; exactly one ticket runs
// at a time. A ticket leaves the queue early when its context ends (the
// client went away or the request deadline passed) or when it has waited
// longer than the configured wait timeout, and the next ticket takes its
// turn.
package queue

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultDepth is the number of waiting requests when Config.Depth is not
// positive.
const DefaultDepth = 16

var (
	// ErrFull is returned by Admit when Depth requests are already waiting;
	// the server answers 429 queue_full.
	ErrFull = errors.New("queue: full")
	// ErrClosed is returned by Admit after Close; the server answers 503
	// service_shutting_down.
	ErrClosed = errors.New("queue: closed")
	// ErrWaitTimeout is returned by Wait when the ticket spent longer than
	// Config.WaitTimeout in the queue; the server answers 503 queue_timeout.
	ErrWaitTimeout = errors.New("queue: wait timeout")
	// ErrTicketFinished is returned by Wait on a ticket that was already
	// done, cancelled or timed out: a ticket is good for one run only.
	ErrTicketFinished = errors.New("queue: ticket already finished")
)

// Config sets the queue's bounds.
type Config struct {
	// Depth is the number of admitted requests that may wait for the
	// worker at once, not counting the one running; DefaultDepth when not
	// positive.
	Depth int
	// WaitTimeout is the longest a ticket may stay in the queue, counted
	// from Admit; zero or negative means no limit.
	WaitTimeout time.Duration
}

// Stats is a snapshot of the queue for /health and /metrics.
type Stats struct {
	// Waiting is the number of admitted tickets that have not started.
	Waiting int
	// Running is 1 while a ticket holds the worker, else 0.
	Running int
	// Admitted counts successful Admit calls.
	Admitted uint64
	// Rejected counts Admit calls refused with ErrFull or ErrClosed.
	Rejected uint64
	// TimedOut counts Wait calls that ended with ErrWaitTimeout.
	TimedOut uint64
	// Cancelled counts tickets that left without running: Wait ended by
	// its context, or Cancel before the ticket ran.
	Cancelled uint64
}

// Queue is a bounded FIFO in front of a single worker. It is safe for
// concurrent use.
type Queue struct {
	depth       int
	waitTimeout time.Duration

	mu      sync.Mutex
	waiting list.List // of *Ticket, in admission order
	running *Ticket   // the ticket holding the worker, or nil
	closed  bool
	changed chan struct{} // closed and replaced on every state change
	stats   Stats
}

type ticketState int

const (
	stateQueued   ticketState = iota // in q.waiting
	stateRunning                     // holds the worker
	stateFinished                    // done, cancelled or timed out
)

// Ticket is one admitted request's place in the queue. Its owner calls
// either Wait (and, when Wait returns nil, Done) or Cancel.
type Ticket struct {
	q        *Queue
	admitted time.Time
	elem     *list.Element
	ready    chan struct{} // closed when the ticket gets the worker or leaves the queue
	state    ticketState   // guarded by q.mu
	ran      bool          // Wait returned nil; guarded by q.mu
}

// New returns an empty, open queue configured by c.
func New(c Config) *Queue {
	depth := c.Depth
	if depth <= 0 {
		depth = DefaultDepth
	}
	return &Queue{depth: depth, waitTimeout: c.WaitTimeout, changed: make(chan struct{})}
}

// Admit reserves a waiting place, so that the server can refuse a request
// with a real status before a streaming response's headers go out. It fails
// at once with ErrFull when Depth tickets are waiting and with ErrClosed
// after Close. The caller must then call Wait or Cancel on the ticket.
func (q *Queue) Admit() (*Ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.stats.Rejected++
		return nil, ErrClosed
	}
	if q.waiting.Len() >= q.depth {
		q.stats.Rejected++
		return nil, ErrFull
	}
	t := &Ticket{q: q, admitted: time.Now(), ready: make(chan struct{})}
	t.elem = q.waiting.PushBack(t)
	q.stats.Admitted++
	q.dispatchLocked()
	q.notifyLocked()
	return t, nil
}

// Wait blocks until the ticket holds the worker, so that requests run one at
// a time in admission order. It returns nil when the ticket's turn has come;
// the caller then runs and must call Done. It returns ctx.Err() when ctx ends
// first and ErrWaitTimeout when the ticket has been in the queue longer than
// the wait timeout; in both cases the ticket has left the queue and the next
// one may run. It returns ErrTicketFinished when the ticket was cancelled
// (also while Wait blocks) or has already finished.
func (t *Ticket) Wait(ctx context.Context) error {
	q := t.q
	if settled, err := t.settle(ctx); settled {
		return err
	}

	var timeout <-chan time.Time
	if q.waitTimeout > 0 {
		timer := time.NewTimer(time.Until(t.admitted.Add(q.waitTimeout)))
		defer timer.Stop()
		timeout = timer.C
	}

	select {
	case <-t.ready:
	case <-ctx.Done():
	case <-timeout:
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	switch t.state {
	case stateFinished:
		return ErrTicketFinished
	case stateRunning:
		if err := ctx.Err(); err != nil {
			// The turn came as the client left: hand the worker on.
			t.leaveLocked()
			q.stats.Cancelled++
			return err
		}
		t.ran = true
		return nil
	}
	// Still queued: the context ended or the wait timed out.
	t.leaveLocked()
	if err := ctx.Err(); err != nil {
		q.stats.Cancelled++
		return err
	}
	q.stats.TimedOut++
	return ErrWaitTimeout
}

// settle decides Wait without blocking when the ticket is finished, has
// already run, or ctx has already ended.
func (t *Ticket) settle(ctx context.Context) (bool, error) {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case t.state == stateFinished:
		return true, ErrTicketFinished
	case t.ran:
		return true, nil
	case ctx.Err() != nil:
		t.leaveLocked()
		q.stats.Cancelled++
		return true, ctx.Err()
	}
	return false, nil
}

// Done releases the worker after a run so that the next ticket starts. It is
// safe to call more than once; on a ticket that has not run it acts as
// Cancel.
func (t *Ticket) Done() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.state == stateFinished {
		return
	}
	if !t.ran {
		q.stats.Cancelled++
	}
	t.leaveLocked()
}

// Cancel gives back a ticket whose request will not run (for example when
// validation failed after Admit), freeing its place. It is safe to call more
// than once and after Done.
func (t *Ticket) Cancel() { t.Done() }

// leaveLocked removes t from the queue or releases the worker, then starts
// the next ticket.
func (t *Ticket) leaveLocked() {
	q := t.q
	switch t.state {
	case stateQueued:
		q.waiting.Remove(t.elem)
		close(t.ready) // wake a Wait blocked on a ticket cancelled elsewhere
	case stateRunning:
		q.running = nil
	}
	t.elem = nil
	t.state = stateFinished
	q.dispatchLocked()
	q.notifyLocked()
}

// dispatchLocked gives the idle worker to the oldest waiting ticket.
func (q *Queue) dispatchLocked() {
	if q.running != nil {
		return
	}
	front := q.waiting.Front()
	if front == nil {
		return
	}
	t := q.waiting.Remove(front).(*Ticket)
	t.elem = nil
	t.state = stateRunning
	q.running = t
	close(t.ready)
}

// notifyLocked wakes Drain callers after a change of state.
func (q *Queue) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Close stops admitting new tickets (Admit returns ErrClosed) at the start
// of a shutdown; tickets already admitted still run.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.notifyLocked()
}

// Drain blocks until no ticket is running or waiting, so that shutdown can
// wait for the work in hand; it returns ctx.Err() when ctx ends first. Call
// Close before Drain, or new tickets may keep the queue busy.
func (q *Queue) Drain(ctx context.Context) error {
	for {
		q.mu.Lock()
		idle := q.running == nil && q.waiting.Len() == 0
		changed := q.changed
		q.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stats returns the current counters for /health and /metrics.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Waiting = q.waiting.Len()
	if q.running != nil {
		s.Running = 1
	}
	return s
}
