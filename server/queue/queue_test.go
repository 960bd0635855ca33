package queue

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mustAdmit admits a ticket or fails the test.
func mustAdmit(t *testing.T, q *Queue) *Ticket {
	t.Helper()
	tk, err := q.Admit()
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return tk
}

// mustRun admits a ticket and waits for its turn, which must come at once.
func mustRun(t *testing.T, q *Queue) *Ticket {
	t.Helper()
	tk := mustAdmit(t, q)
	if err := tk.Wait(context.Background()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return tk
}

// eventually polls cond until it holds or a second passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitErr runs tk.Wait in a goroutine and returns a channel for its result.
func waitErr(ctx context.Context, tk *Ticket) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- tk.Wait(ctx) }()
	return ch
}

// recv returns the value from ch or fails after a second.
func recv(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}

// blocked checks that nothing arrives on ch for a short while.
func blocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned %v while the worker was busy", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestDepthBound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		depth     int
		wantDepth int
	}{
		{"one", 1, 1},
		{"three", 3, 3},
		{"default", 0, DefaultDepth},
		{"negative", -4, DefaultDepth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Config{Depth: tc.depth})
			run := mustRun(t, q)
			var waiting []*Ticket
			for range tc.wantDepth {
				waiting = append(waiting, mustAdmit(t, q))
			}
			if _, err := q.Admit(); !errors.Is(err, ErrFull) {
				t.Fatalf("Admit beyond depth: got %v, want ErrFull", err)
			}
			want := Stats{Waiting: tc.wantDepth, Running: 1, Admitted: uint64(tc.wantDepth) + 1, Rejected: 1}
			if diff := cmp.Diff(want, q.Stats()); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
			// Starting the next ticket frees one waiting place.
			run.Done()
			if _, err := q.Admit(); err != nil {
				t.Fatalf("Admit after a place was freed: %v", err)
			}
			for _, tk := range waiting {
				tk.Cancel()
			}
		})
	}
}

func TestFIFOOrder(t *testing.T) {
	const n = 24
	q := New(Config{Depth: n})
	first := mustRun(t, q)

	tickets := make([]*Ticket, n)
	for i := range tickets {
		tickets[i] = mustAdmit(t, q)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	// Start the waiters in a shuffled order: the run order must still be
	// the admission order.
	for _, i := range rand.Perm(n) {
		wg.Go(func() {
			if err := tickets[i].Wait(context.Background()); err != nil {
				t.Errorf("ticket %d: Wait: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			tickets[i].Done()
		})
	}
	time.Sleep(10 * time.Millisecond) // let the waiters block
	first.Done()
	wg.Wait()

	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("run order (-want +got):\n%s", diff)
	}
}

func TestDoneHandsOver(t *testing.T) {
	q := New(Config{})
	a := mustRun(t, q)
	b := mustAdmit(t, q)
	c := mustAdmit(t, q)
	bc := waitErr(context.Background(), b)
	cc := waitErr(context.Background(), c)
	blocked(t, bc)

	a.Done()
	if err := recv(t, bc); err != nil {
		t.Fatalf("b.Wait: %v", err)
	}
	blocked(t, cc)
	if diff := cmp.Diff(Stats{Waiting: 1, Running: 1, Admitted: 3}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}

	b.Done()
	b.Done() // a second Done must not release c's turn
	if err := recv(t, cc); err != nil {
		t.Fatalf("c.Wait: %v", err)
	}
	if diff := cmp.Diff(Stats{Running: 1, Admitted: 3}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	c.Done()
	if diff := cmp.Diff(Stats{Admitted: 3}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if err := c.Wait(context.Background()); !errors.Is(err, ErrTicketFinished) {
		t.Errorf("Wait after Done: got %v, want ErrTicketFinished", err)
	}
}

func TestWaitTimeout(t *testing.T) {
	const timeout = 40 * time.Millisecond
	q := New(Config{Depth: 2, WaitTimeout: timeout})
	run := mustRun(t, q)

	late := mustAdmit(t, q)
	start := time.Now()
	if err := late.Wait(context.Background()); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("Wait: got %v, want ErrWaitTimeout", err)
	}
	if waited := time.Since(start); waited < timeout {
		t.Errorf("Wait returned after %v, before the %v timeout", waited, timeout)
	}

	// The timeout counts from Admit, not from Wait.
	stale := mustAdmit(t, q)
	time.Sleep(timeout + 10*time.Millisecond)
	start = time.Now()
	if err := stale.Wait(context.Background()); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("Wait after the timeout: got %v, want ErrWaitTimeout", err)
	}
	if waited := time.Since(start); waited > timeout/2 {
		t.Errorf("Wait after the timeout blocked for %v", waited)
	}

	if diff := cmp.Diff(Stats{Running: 1, Admitted: 3, TimedOut: 2}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}

	// A ticket whose turn came in time runs even if its owner calls Wait
	// late.
	run.Done()
	next := mustAdmit(t, q)
	time.Sleep(timeout + 10*time.Millisecond)
	if err := next.Wait(context.Background()); err != nil {
		t.Fatalf("Wait on a ticket that already had its turn: %v", err)
	}
	next.Done()
}

func TestCancelWhileWaiting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		want    error
		trigger bool // call cancel to end the wait
	}{
		{
			name:    "cancelled",
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			want:    context.Canceled,
			trigger: true,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			want: context.DeadlineExceeded,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Config{Depth: 2})
			run := mustRun(t, q)
			gone := mustAdmit(t, q)
			after := mustAdmit(t, q)
			if _, err := q.Admit(); !errors.Is(err, ErrFull) {
				t.Fatalf("Admit on a full queue: got %v, want ErrFull", err)
			}

			ctx, cancel := tc.ctx()
			defer cancel()
			goneErr := waitErr(ctx, gone)
			afterErr := waitErr(context.Background(), after)
			blocked(t, goneErr)
			if tc.trigger {
				cancel()
			}
			if err := recv(t, goneErr); !errors.Is(err, tc.want) {
				t.Fatalf("Wait: got %v, want %v", err, tc.want)
			}

			// The place is free again and the later ticket is not stuck
			// behind the one that left.
			extra := mustAdmit(t, q)
			run.Done()
			if err := recv(t, afterErr); err != nil {
				t.Fatalf("later ticket: Wait: %v", err)
			}
			after.Done()
			if err := extra.Wait(context.Background()); err != nil {
				t.Fatalf("extra ticket: Wait: %v", err)
			}
			extra.Done()
			if diff := cmp.Diff(Stats{Admitted: 4, Rejected: 1, Cancelled: 1}, q.Stats()); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitWithEndedContext(t *testing.T) {
	// Even when the turn has already come, an ended context wins and the
	// worker passes to the next ticket.
	q := New(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tk := mustAdmit(t, q)
	next := mustAdmit(t, q)
	if err := tk.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: got %v, want context.Canceled", err)
	}
	if err := recv(t, waitErr(context.Background(), next)); err != nil {
		t.Fatalf("next ticket: Wait: %v", err)
	}
	next.Done()
	if diff := cmp.Diff(Stats{Admitted: 2, Cancelled: 1}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestCancelBeforeWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		busy bool // another ticket holds the worker
	}{
		{"queued behind a run", true},
		{"turn already given", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Config{Depth: 4})
			var run *Ticket
			if tc.busy {
				run = mustRun(t, q)
			}
			abandoned := mustAdmit(t, q)
			next := mustAdmit(t, q)
			abandoned.Cancel()
			abandoned.Cancel()
			if run != nil {
				run.Done()
			}
			if err := recv(t, waitErr(context.Background(), next)); err != nil {
				t.Fatalf("next ticket: Wait: %v", err)
			}
			next.Done()
			if err := abandoned.Wait(context.Background()); !errors.Is(err, ErrTicketFinished) {
				t.Errorf("Wait after Cancel: got %v, want ErrTicketFinished", err)
			}
			admitted := uint64(2)
			if tc.busy {
				admitted++
			}
			if diff := cmp.Diff(Stats{Admitted: admitted, Cancelled: 1}, q.Stats()); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCloseAndDrain(t *testing.T) {
	q := New(Config{Depth: 4})
	run := mustRun(t, q)
	queued := mustAdmit(t, q)
	q.Close()
	if _, err := q.Admit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Admit after Close: got %v, want ErrClosed", err)
	}

	// Drain gives up when its context ends first.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with work in hand: got %v, want DeadlineExceeded", err)
	}

	drained := make(chan error, 1)
	go func() { drained <- q.Drain(context.Background()) }()
	queuedErr := waitErr(context.Background(), queued)
	blocked(t, drained)

	// Tickets admitted before Close still run.
	run.Done()
	if err := recv(t, queuedErr); err != nil {
		t.Fatalf("ticket admitted before Close: Wait: %v", err)
	}
	blocked(t, drained)
	queued.Done()
	if err := recv(t, drained); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if err := q.Drain(context.Background()); err != nil {
		t.Fatalf("Drain on an idle queue: %v", err)
	}
	if diff := cmp.Diff(Stats{Admitted: 2, Rejected: 1}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()

	q := New(Config{Depth: 8, WaitTimeout: 30 * time.Millisecond})
	run := mustRun(t, q)
	var wg sync.WaitGroup
	for i := range 8 {
		tk := mustAdmit(t, q)
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if i%2 == 0 {
				cancel()
			}
			if tk.Wait(ctx) == nil {
				tk.Done()
			}
		})
	}
	wg.Wait()
	run.Done()
	if err := q.Drain(context.Background()); err != nil {
		t.Fatalf("Drain: %v", err)
	}

	eventually(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

func TestStress(t *testing.T) {
	const (
		workers  = 64
		attempts = 20
	)
	q := New(Config{Depth: 8, WaitTimeout: 200 * time.Millisecond})

	var (
		admitMu  sync.Mutex // serializes Admit with seq so seq is the admission order
		seq      int
		orderMu  sync.Mutex
		lastSeq  = -1
		inflight atomic.Int32
		ran      atomic.Uint64
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range attempts {
				admitMu.Lock()
				tk, err := q.Admit()
				mySeq := seq
				if err == nil {
					seq++
				}
				admitMu.Unlock()
				if err != nil {
					if !errors.Is(err, ErrFull) {
						t.Errorf("Admit: %v", err)
						return
					}
					time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				switch r.IntN(8) {
				case 0:
					cancel()
				case 1:
					tk.Cancel()
					cancel()
					continue
				}
				err = tk.Wait(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrWaitTimeout) {
						t.Errorf("Wait: %v", err)
					}
					continue
				}
				if n := inflight.Add(1); n != 1 {
					t.Errorf("%d tickets running at once", n)
				}
				orderMu.Lock()
				if mySeq <= lastSeq {
					t.Errorf("ticket %d ran after ticket %d", mySeq, lastSeq)
				}
				lastSeq = mySeq
				orderMu.Unlock()
				if r.IntN(4) == 0 {
					runtime.Gosched()
				}
				ran.Add(1)
				inflight.Add(-1)
				tk.Done()
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("stress run took %v", d)
	}

	s := q.Stats()
	if s.Waiting != 0 || s.Running != 0 {
		t.Errorf("queue not idle after the run: %+v", s)
	}
	if got, want := s.Admitted+s.Rejected, uint64(workers*attempts); got != want {
		t.Errorf("Admitted+Rejected = %d, want %d", got, want)
	}
	if got := ran.Load() + s.TimedOut + s.Cancelled; got != s.Admitted {
		t.Errorf("ran %d + timed out %d + cancelled %d = %d, want Admitted %d",
			ran.Load(), s.TimedOut, s.Cancelled, got, s.Admitted)
	}
	if ran.Load() == 0 {
		t.Error("no ticket ran")
	}
}

func TestCancelWakesWait(t *testing.T) {
	// Cancel from another goroutine (the handler giving up) must not leave
	// a Wait blocked forever.
	q := New(Config{})
	run := mustRun(t, q)
	tk := mustAdmit(t, q)
	errc := waitErr(context.Background(), tk)
	blocked(t, errc)
	tk.Cancel()
	if err := recv(t, errc); !errors.Is(err, ErrTicketFinished) {
		t.Fatalf("Wait: got %v, want ErrTicketFinished", err)
	}
	run.Done()
	if diff := cmp.Diff(Stats{Admitted: 2, Cancelled: 1}, q.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
}
