package runtime_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// TestProfilePrefill runs prompts of one token, a bucket edge, one past
// it and several segments launch by launch through ProfilePrefill on an
// engine that otherwise replays the prefill buckets as graphs: the logits
// equal the plain engine's Prefill bit for bit, the hook sees every step
// Prefill takes (with a decode tail, its tokens as decode steps) and every
// launch of each step's phase once, in order, and a decode after the
// profiled prefill continues from the same state.
func TestProfilePrefill(t *testing.T) {
	be := &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}
	e := tinyEngine(t, be, false)
	plain := tinyEngine(t, runtime.NewCPU(), false)
	launches := map[string]int{}
	for _, ph := range e.Plan().Phases {
		launches[ph.Name] = len(ph.Launches)
	}
	decode := ""
	for _, ph := range e.Plan().Phases {
		if ph.Kind == plan.DecodeStep {
			decode = ph.Name
		}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		n, tail int
	}{
		{n: 1}, {n: 8}, {n: 9}, {n: 32}, {n: 33}, {n: 70},
		{n: 1, tail: 4}, {n: 35, tail: 4}, {n: 37, tail: 4}, {n: 70, tail: 8},
	} {
		for _, en := range []*runtime.Engine{e, plain} {
			if err := en.SetDecodeTail(tc.tail); err != nil {
				t.Fatal(err)
			}
			if err := en.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		toks := prompt(tc.n, e.Vocab())
		want, err := plain.Prefill(ctx, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		var steps []runtime.PrefillStep
		total := 0
		got, err := e.ProfilePrefill(ctx, toks, func(s runtime.PrefillStep, l runtime.Launches) error {
			steps = append(steps, s)
			var seen []int
			err := l(func(i int, run func() error) error {
				seen = append(seen, i)
				return run()
			})
			if len(seen) != launches[s.Phase] || !slices.IsSorted(seen) || (len(seen) > 0 && seen[0] != 0) {
				t.Errorf("n %d: step %+v: the hook saw launches %v of %d", tc.n, s, seen, launches[s.Phase])
			}
			total += len(seen)
			return err
		})
		if err != nil {
			t.Fatalf("n %d tail %d: %v", tc.n, tc.tail, err)
		}
		if !slices.Equal(want, got) {
			t.Fatalf("n %d tail %d: profiled logits differ from Prefill's", tc.n, tc.tail)
		}
		// The steps Prefill takes: each segment's bucket, the tail's
		// tokens one decode step each.
		var wantSteps []runtime.PrefillStep
		wantLaunches := 0
		segs := runtime.Segments(tc.n, e.Plan().Buckets)
		for i, s := range segs {
			if i == len(segs)-1 && s.Tokens <= tc.tail {
				for j := range s.Tokens {
					wantSteps = append(wantSteps, runtime.PrefillStep{Segment: i, Phase: decode, Kind: plan.DecodeStep, Start: s.Start + j, Tokens: 1, Pos: s.Start + j})
					wantLaunches += launches[decode]
				}
				continue
			}
			ph := prefillPhase(t, e.Plan(), s.Bucket)
			wantSteps = append(wantSteps, runtime.PrefillStep{Segment: i, Phase: ph, Kind: plan.Prefill, Start: s.Start, Tokens: s.Tokens, Pos: s.Start})
			wantLaunches += launches[ph]
		}
		if diff := cmp.Diff(wantSteps, steps); diff != "" {
			t.Errorf("n %d tail %d: steps (-want +got):\n%s", tc.n, tc.tail, diff)
		}
		if total != wantLaunches {
			t.Errorf("n %d tail %d: %d launches, want %d", tc.n, tc.tail, total, wantLaunches)
		}
		if e.Position() != tc.n {
			t.Errorf("n %d: position %d after the profiled prefill", tc.n, e.Position())
		}
		tok := runtime.Argmax(want)
		want, err = plain.Decode(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = e.Decode(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(want, got) {
			t.Fatalf("n %d tail %d: the decode after the profiled prefill differs", tc.n, tc.tail)
		}
	}
	// Profiled steps capture and replay nothing: the graphs seen are the
	// plain Decode's after each prompt.
	if be.captures != 1 {
		t.Errorf("%d captures, want 1 (the decode step's; profiled prefills capture nothing)", be.captures)
	}
}

// TestProfilePrefillErrors: a hook that fails or does not run its
// launches fails the prefill and breaks the engine; a nil hook is refused.
func TestProfilePrefillErrors(t *testing.T) {
	e := tinyEngine(t, runtime.NewCPU(), false)
	ctx := context.Background()
	toks := prompt(40, e.Vocab())
	if _, err := e.ProfilePrefill(ctx, toks, nil); err == nil {
		t.Error("a nil hook was accepted")
	}
	stop := errors.New("stop")
	for _, hook := range []runtime.PrefillSteps{
		func(s runtime.PrefillStep, _ runtime.Launches) error { return stop },
		func(runtime.PrefillStep, runtime.Launches) error { return nil },
		func(_ runtime.PrefillStep, l runtime.Launches) error {
			each := func(_ int, run func() error) error { return run() }
			if err := l(each); err != nil {
				return err
			}
			return l(each)
		},
	} {
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ProfilePrefill(ctx, toks, hook); err == nil {
			t.Error("a bad hook's prefill succeeded")
		}
		if _, err := e.Decode(ctx, 1); !errors.Is(err, runtime.ErrBroken) {
			t.Errorf("after a failed profiled prefill: %v, want ErrBroken", err)
		}
	}
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ProfilePrefill(ctx, toks, func(s runtime.PrefillStep, _ runtime.Launches) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("hook's error: %v", err)
	}
}

// prefillPhase is the name of the plan's prefill phase of bucket b.
func prefillPhase(t *testing.T, p *plan.Plan, b int) string {
	t.Helper()
	for _, ph := range p.Phases {
		if ph.Kind == plan.Prefill && ph.Tokens == b {
			return ph.Name
		}
	}
	t.Fatalf("no prefill phase of bucket %d", b)
	return ""
}
