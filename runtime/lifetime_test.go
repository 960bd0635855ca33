package runtime_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// holdingBackend is the CPU backend that, once armed, holds a launch until
// the engine's interrupt check fails, and records any Free that comes
// while a launch runs.
type holdingBackend struct {
	*runtime.CPU
	check   func() error
	armed   atomic.Bool
	inside  chan struct{} // closed when the held launch has started
	active  atomic.Int32  // launches running
	freedIn atomic.Int32  // Free calls during a launch
}

func (b *holdingBackend) SetInterrupt(check func() error) {
	b.check = check
	b.CPU.SetInterrupt(check)
}

func (b *holdingBackend) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, p *runtime.Params) error {
	b.active.Add(1)
	defer b.active.Add(-1)
	if b.armed.CompareAndSwap(true, false) {
		close(b.inside)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if err := b.check(); err != nil {
				return err
			}
		}
		return errors.New("held launch: never interrupted")
	}
	return b.CPU.Launch(k, l, args, rows, p)
}

func (b *holdingBackend) Free(m runtime.Mem) {
	if b.active.Load() > 0 {
		b.freedIn.Add(1)
	}
	b.CPU.Free(m)
}

// TestCloseWaitsForTheRunningStep closes an engine while its worker is
// inside a launch: Close interrupts the step and frees nothing before the
// launch has returned, the step fails with ErrClosed, and every later use
// fails the same way.
func TestCloseWaitsForTheRunningStep(t *testing.T) {
	be := &holdingBackend{CPU: runtime.NewCPU(), inside: make(chan struct{})}
	e := tinyEngine(t, be, false)
	ctx := context.Background()
	if _, err := e.Prefill(ctx, []int32{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	be.armed.Store(true)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Decode(ctx, 4)
		errc <- err
	}()
	<-be.inside
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if n := be.active.Load(); n != 0 {
		t.Errorf("Close returned with %d launches running", n)
	}
	if n := be.freedIn.Load(); n != 0 {
		t.Errorf("%d buffers were freed while a launch ran", n)
	}
	if err := <-errc; !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("the interrupted Decode = %v, want ErrClosed", err)
	}
	if _, err := e.Decode(ctx, 4); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Decode after Close = %v, want ErrClosed", err)
	}
	if err := e.Reset(); !errors.Is(err, runtime.ErrClosed) {
		t.Errorf("Reset after Close = %v, want ErrClosed", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
}

// TestCancelInsideALaunch checks that a step's context reaches inside the
// CPU backend's launches: cancelling it stops the held launch.
func TestCancelInsideALaunch(t *testing.T) {
	be := &holdingBackend{CPU: runtime.NewCPU(), inside: make(chan struct{})}
	e := tinyEngine(t, be, false)
	ctx, cancel := context.WithCancel(context.Background())
	be.armed.Store(true)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Prefill(ctx, []int32{1, 2, 3}, nil)
		errc <- err
	}()
	<-be.inside
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Prefill = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled prefill did not return")
	}
	if err := e.Reset(); err != nil {
		t.Fatalf("Reset after a cancelled step: %v", err)
	}
	if _, err := e.Prefill(context.Background(), []int32{1, 2, 3}, nil); err != nil {
		t.Errorf("Prefill after a cancelled step: %v", err)
	}
}
