package runtime_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// counting is the CPU backend counting its launches.
type counting struct {
	*runtime.CPU
	launches int
}

func (c *counting) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, p *runtime.Params) error {
	c.launches++
	return c.CPU.Launch(k, l, args, rows, p)
}

// TestDecodeTail: with a decode tail of 3, a prompt whose last segment is
// that short ends in decode steps (its launches are the earlier segments'
// prefill steps and one decode step a tail token), and gives the logits a
// plain prefill gives at every length around the bucket edges; longer last
// segments and teacher-forced prefills are prefilled as before. The cpu
// engine starts without a tail.
func TestDecodeTail(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	launches := map[plan.PhaseKind]map[int]int{}
	for _, ph := range p.Phases {
		if launches[ph.Kind] == nil {
			launches[ph.Kind] = map[int]int{}
		}
		launches[ph.Kind][ph.Tokens] = len(ph.Launches)
	}
	plain, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	be := &counting{CPU: runtime.NewCPU()}
	tail, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if n := tail.DecodeTail(); n != 0 {
		t.Fatalf("the cpu engine starts with a decode tail of %d, want 0", n)
	}
	if err := tail.SetDecodeTail(3); err != nil {
		t.Fatal(err)
	}
	V := plain.Vocab()
	ctx := context.Background()
	for _, n := range []int{1, 2, 3, 4, 8, 9, 11, 12, 32, 33, 35, 36, 65, 67} {
		seq := prompt(n+2, V)
		var want, got [][]float32
		for _, e := range []*runtime.Engine{plain, tail} {
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			be.launches = 0
			last, err := e.Prefill(ctx, seq[:n], nil)
			if err != nil {
				t.Fatal(err)
			}
			if e == tail {
				wantLaunches := 0
				segs := runtime.Segments(n, p.Buckets)
				for i, s := range segs {
					if i == len(segs)-1 && s.Tokens <= 3 {
						wantLaunches += s.Tokens * launches[plan.DecodeStep][1]
					} else {
						wantLaunches += launches[plan.Prefill][s.Bucket]
					}
				}
				if be.launches != wantLaunches {
					t.Errorf("%d tokens: %d launches, want %d (segments %v)", n, be.launches, wantLaunches, segs)
				}
			}
			l := [][]float32{last}
			for _, tok := range seq[n:] {
				d, err := e.Decode(ctx, tok)
				if err != nil {
					t.Fatal(err)
				}
				l = append(l, d)
			}
			if e.Position() != len(seq) {
				t.Errorf("%d tokens: position %d, want %d", n, e.Position(), len(seq))
			}
			if e == plain {
				want = l
			} else {
				got = l
			}
		}
		compareRows(t, fmt.Sprintf("%d tokens with a decode tail of 3", n), want, got)
	}
	// Teacher-forced rows always prefill: every position's logits.
	seq := prompt(34, V)
	be.launches = 0
	if rows := teacherForced(t, tail, seq); len(rows) != len(seq) || rows[len(seq)-1] == nil {
		t.Errorf("teacher-forced prefill with a decode tail: %d rows", len(rows))
	}
	if want := launches[plan.Prefill][32] + launches[plan.Prefill][8]; be.launches < want {
		t.Errorf("teacher-forced prefill of 34 tokens: %d launches, want its two prefill steps' %d and the rows'", be.launches, want)
	}
	for _, bad := range []int{-1, 33} {
		if err := tail.SetDecodeTail(bad); err == nil {
			t.Errorf("SetDecodeTail(%d): no error", bad)
		}
	}
}
