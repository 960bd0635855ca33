package runtime_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// recorder is the CPU backend with graph capture the way a GPU does it:
// captured launches keep their arguments, and on replay the kernels read
// the position from the parameter block as it is then, not from the
// values Launch was given at capture. An engine that forgets to refresh the block, or
// that puts a moving value in a launch argument, decodes wrong tokens.
type recorder struct {
	*runtime.CPU
	block     runtime.Params
	capturing bool
	captures  int
	replays   int
}

type recorded struct {
	k    *plan.Kernel
	l    *plan.Launch
	args []runtime.Ref
	rows int
}

type recordedGraph struct {
	r        *recorder
	launches []recorded
}

func (r *recorder) SetParams(p *runtime.Params) error {
	if r.capturing {
		return errors.New("parameter block written during capture")
	}
	r.block = *p
	return nil
}

// Launch runs the kernel with the block SetParams wrote, as a GPU kernel
// reads it, after checking the engine handed that block to Launch too.
func (r *recorder) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, p *runtime.Params) error {
	if r.block != *p {
		return errors.New("launch with a parameter block other than the one set")
	}
	return r.CPU.Launch(k, l, args, rows, &r.block)
}

func (r *recorder) Sync() error {
	if r.capturing {
		return errors.New("sync during capture")
	}
	return nil
}

func (g *recordedGraph) Replay() error {
	g.r.replays++
	for _, c := range g.launches {
		if err := g.r.CPU.Launch(c.k, c.l, c.args, c.rows, &g.r.block); err != nil {
			return err
		}
	}
	return nil
}

func (g *recordedGraph) Destroy() { g.launches = nil }

// graphBackend records launches made during capture instead of running them.
type graphBackend struct {
	*recorder
	graph    *recordedGraph
	slotRows int // captured launches whose row count is a slot's
}

func (b *graphBackend) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, p *runtime.Params) error {
	if b.capturing {
		b.graph.launches = append(b.graph.launches, recorded{k, l, slices.Clone(args), rows})
		if rows < 0 {
			b.slotRows++
		}
		return nil
	}
	return b.recorder.Launch(k, l, args, rows, p)
}

func (b *graphBackend) Capture(fn func() error) (runtime.Graph, error) {
	b.graph = &recordedGraph{r: b.recorder}
	b.capturing = true
	b.captures++
	err := fn()
	b.capturing = false
	if err != nil {
		return nil, err
	}
	return b.graph, nil
}

// TestDecodeGraph decodes with the decode step replayed from one captured
// graph and checks every step's logits equal the launch-by-launch engine's,
// bit for bit, across a Reset and a snapshot restore.
func TestDecodeGraph(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	be := &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}
	graphed, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer graphed.Close()
	if plain.Graphs() || !graphed.Graphs() {
		t.Fatalf("graphs: CPU %v, graph backend %v", plain.Graphs(), graphed.Graphs())
	}
	ctx := context.Background()
	run := func(e *runtime.Engine, toks []int32, steps int) [][]float32 {
		var out [][]float32
		logits, err := e.Prefill(ctx, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
		for range steps {
			if logits, err = e.Decode(ctx, runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out
	}
	for _, n := range []int{1, 9, 33} {
		for _, e := range []*runtime.Engine{plain, graphed} {
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		toks := prompt(n, plain.Vocab())
		want, got := run(plain, toks, 6), run(graphed, toks, 6)
		for i := range want {
			if !slices.Equal(want[i], got[i]) {
				t.Fatalf("prompt %d, step %d: graph logits differ from launch by launch", n, i)
			}
		}
	}
	// The decode step once (18 replays), each prefill bucket once (the
	// launches before the last row's LM head: one graph each), replayed
	// once per segment: 1 → 8; 9 → 32; 33 → 32 + 8.
	if be.captures != 3 || be.replays != 18+4 {
		t.Errorf("%d captures and %d replays, want 3 and 22", be.captures, be.replays)
	}
	graphed.SetGraphs(false)
	if graphed.Graphs() {
		t.Error("SetGraphs(false) left graphs on")
	}
}

// TestProfileDecode runs decode steps launch by launch through the
// profile hook on an engine that otherwise replays a graph: the hook sees
// every launch of the decode phase once, in order; the logits equal
// Decode's bit for bit; a hook's error fails the step and breaks the engine.
func TestProfileDecode(t *testing.T) {
	be := &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}
	e := tinyEngine(t, be, false)
	plain := tinyEngine(t, runtime.NewCPU(), false)
	var decode *plan.Phase
	for i := range e.Plan().Phases {
		if e.Plan().Phases[i].Kind == plan.DecodeStep {
			decode = &e.Plan().Phases[i]
		}
	}
	ctx := context.Background()
	toks := prompt(9, e.Vocab())
	want, err := plain.Prefill(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Prefill(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 4 {
		var seen []int
		tok := runtime.Argmax(want)
		if want, err = plain.Decode(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if step%2 == 1 { // profiled steps between replayed ones
			if got, err = e.Decode(ctx, tok); err != nil {
				t.Fatal(err)
			}
		} else {
			got, err = e.ProfileDecode(ctx, tok, func(i int, run func() error) error {
				seen = append(seen, i)
				return run()
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(decode.Launches) || !slices.IsSorted(seen) || seen[0] != 0 {
				t.Fatalf("step %d: the hook saw launches %v of %d", step, seen, len(decode.Launches))
			}
		}
		if !slices.Equal(want, got) {
			t.Fatalf("step %d: profiled logits differ from Decode's", step)
		}
	}
	// The prefill's bucket: one capture, one replay; the decode step: one
	// capture, two replays.
	if be.captures != 2 || be.replays != 3 {
		t.Errorf("%d captures and %d replays, want 2 and 3 (profiled steps replay nothing)", be.captures, be.replays)
	}
	stop := errors.New("stop")
	if _, err := e.ProfileDecode(ctx, 1, func(int, func() error) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("hook's error: %v", err)
	}
	if _, err := e.Decode(ctx, 1); !errors.Is(err, runtime.ErrBroken) {
		t.Errorf("after a failed profiled step: %v, want ErrBroken", err)
	}
}
