package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/runtime"
)

// stepBackend is graphBackend with step graphs (runtime.StepGrapher) run
// as a GPU runs them: on Start the block and the input are copied in, the
// recorded launches replay with that block, and the result is copied out
// for Wait. It counts the synchronous parameter writes and uploads the
// engine makes, which a step graph replaces.
type stepBackend struct {
	*graphBackend
	setParams, uploads int
	starts             int
	failStart          error
	failCapture        error
}

type stepGraph struct {
	b                  *stepBackend
	g                  *recordedGraph
	in, out            runtime.Ref
	inBytes, outBytes  int64
	result             []byte
	started, destroyed bool
}

func newStepBackend() *stepBackend {
	return &stepBackend{graphBackend: &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}}
}

func (b *stepBackend) SetParams(p *runtime.Params) error {
	b.setParams++
	return b.graphBackend.SetParams(p)
}

func (b *stepBackend) Upload(dst runtime.Ref, src []byte) error {
	b.uploads++
	return b.graphBackend.Upload(dst, src)
}

func (b *stepBackend) CaptureStep(fn func() error, in runtime.Ref, inBytes int64, out runtime.Ref, outBytes int64) (runtime.StepGraph, error) {
	if b.failCapture != nil {
		return nil, b.failCapture
	}
	g, err := b.graphBackend.Capture(fn)
	if err != nil {
		return nil, err
	}
	return &stepGraph{b: b, g: g.(*recordedGraph), in: in, out: out, inBytes: inBytes, outBytes: outBytes}, nil
}

func (s *stepGraph) Start(p *runtime.Params, in []byte) error {
	if s.destroyed {
		return errors.New("start of a destroyed step graph")
	}
	if int64(len(in)) != s.inBytes {
		return fmt.Errorf("input of %d bytes, want %d", len(in), s.inBytes)
	}
	if err := s.b.failStart; err != nil {
		s.b.failStart = nil
		return err
	}
	s.b.starts++
	s.b.block = *p // the graph's first copy
	if err := s.b.CPU.Upload(s.in, in); err != nil {
		return err
	}
	if err := s.g.Replay(); err != nil {
		return err
	}
	s.result = make([]byte, s.outBytes)
	s.started = true
	return s.b.CPU.Download(s.result, s.out)
}

func (s *stepGraph) Wait(dst []byte) error {
	if !s.started || len(dst) != len(s.result) {
		return fmt.Errorf("wait: started %v, %d bytes for a %d-byte result", s.started, len(dst), len(s.result))
	}
	s.started = false
	copy(dst, s.result)
	return nil
}

func (s *stepGraph) Destroy() { s.destroyed = true }

// TestStepGraph: on a step-graph backend every decode step is one graph
// start and one wait, with no parameter write or upload before it, and
// gives the CPU engine's logits (Decode) and draws (DecodeSampled) bit for
// bit, across a Reset; a step whose start fails breaks the engine; with
// graphs off the engine launches step by step again.
func TestStepGraph(t *testing.T) {
	plain := tinyEngine(t, runtime.NewCPU(), false)
	be := newStepBackend()
	e := tinyEngine(t, be, false)
	if pdl, _ := e.Programmatic(); !e.Graphs() || pdl {
		t.Fatalf("graphs %v, programmatic %v: want graphs, and no programmatic launch on the CPU target", e.Graphs(), pdl)
	}
	ctx := context.Background()
	for _, n := range []int{1, 9, 33} {
		toks := prompt(n, plain.Vocab())
		for _, en := range []*runtime.Engine{plain, e} {
			if err := en.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		want, err := plain.Prefill(ctx, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Prefill(ctx, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		for step := range 5 {
			tok := runtime.Argmax(want)
			if want, err = plain.Decode(ctx, tok); err != nil {
				t.Fatal(err)
			}
			be.setParams, be.uploads = 0, 0
			if got, err = e.Decode(ctx, tok); err != nil {
				t.Fatal(err)
			}
			if be.setParams != 0 || be.uploads != 0 {
				t.Errorf("prompt %d, step %d: %d parameter writes and %d uploads before the step graph", n, step, be.setParams, be.uploads)
			}
			if !slices.Equal(want, got) {
				t.Fatalf("prompt %d, step %d: step graph logits differ from the CPU engine's", n, step)
			}
		}
		for _, s := range []runtime.DeviceSampling{{}, {Temperature: 0.8, TopK: 20, Seed: 7}} {
			wantT, wantLP := deviceRun(t, plain, toks, 8, s)
			starts := be.starts
			gotT, gotLP := deviceRun(t, e, toks, 8, s)
			if !slices.Equal(wantT, gotT) || !slices.Equal(wantLP, gotLP) {
				t.Errorf("prompt %d, %+v: step graph draws %v %v, CPU engine %v %v", n, s, gotT, gotLP, wantT, wantLP)
			}
			if be.starts-starts != 7 {
				t.Errorf("prompt %d: %d step graphs for 7 sampled decode steps", n, be.starts-starts)
			}
		}
	}
	if be.captures != 4 {
		t.Errorf("%d captures, want 4 (decode → logits, decode + sample → id, a graph of each prefill bucket)", be.captures)
	}
	stop := errors.New("stop")
	be.failStart = stop
	if _, err := e.Decode(ctx, 1); !errors.Is(err, stop) {
		t.Errorf("failed start: %v", err)
	}
	if _, err := e.Decode(ctx, 1); !errors.Is(err, runtime.ErrBroken) {
		t.Errorf("after a failed step: %v, want ErrBroken", err)
	}
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	e.SetGraphs(false)
	starts := be.starts
	toks := prompt(9, plain.Vocab())
	wantT, _ := deviceRun(t, plain, toks, 4, runtime.DeviceSampling{})
	gotT, _ := deviceRun(t, e, toks, 4, runtime.DeviceSampling{})
	if !slices.Equal(wantT, gotT) || be.starts != starts {
		t.Errorf("graphs off: draws %v (want %v), %d step graphs started", gotT, wantT, be.starts-starts)
	}
}

// TestStepGraphFallback: a backend whose step capture fails still decodes,
// replaying the launches-only graph, and says why.
func TestStepGraphFallback(t *testing.T) {
	plain := tinyEngine(t, runtime.NewCPU(), false)
	be := newStepBackend()
	be.failCapture = errors.New("no copies in graphs here")
	e := tinyEngine(t, be, false)
	toks := prompt(9, plain.Vocab())
	wantT, wantLP := deviceRun(t, plain, toks, 5, runtime.DeviceSampling{})
	gotT, gotLP := deviceRun(t, e, toks, 5, runtime.DeviceSampling{})
	if !slices.Equal(wantT, gotT) || !slices.Equal(wantLP, gotLP) {
		t.Errorf("draws %v %v, want %v %v", gotT, gotLP, wantT, wantLP)
	}
	on, err := e.StepGraphs()
	if on || err == nil || !strings.Contains(err.Error(), "no copies in graphs here") {
		t.Errorf("step graphs %v, %v", on, err)
	}
	if be.replays == 0 || be.starts != 0 {
		t.Errorf("%d replays of the launches-only graph, %d step graphs", be.replays, be.starts)
	}
}

// TestSyntheticContext: a synthetic context puts the engine at position n
// with filled KV cache and states: decode steps run from there with finite
// logits, the same seed gives the same logits, another seed other ones,
// and the position is checked.
func TestSyntheticContext(t *testing.T) {
	e := tinyEngine(t, runtime.NewCPU(), false)
	ctx := context.Background()
	run := func(seed uint64, n int) []float32 {
		t.Helper()
		if err := e.SyntheticContext(seed, n); err != nil {
			t.Fatal(err)
		}
		if e.Position() != n {
			t.Fatalf("position %d after a synthetic context of %d", e.Position(), n)
		}
		var logits []float32
		for range 3 {
			var err error
			if logits, err = e.Decode(ctx, 5); err != nil {
				t.Fatal(err)
			}
		}
		for i, v := range logits {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("seed %d, context %d: logit %d is %v", seed, n, i, v)
			}
		}
		return logits
	}
	a, b, c := run(1, 40), run(1, 40), run(2, 40)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave other logits")
	}
	if slices.Equal(a, c) {
		t.Error("another seed gave the same logits: the context was not filled")
	}
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(ctx, []int32{5}, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, e.Capacity() + 1} {
		if err := e.SyntheticContext(1, n); err == nil || !strings.Contains(err.Error(), "want 1 to the plan's 96") {
			t.Errorf("context %d: %v", n, err)
		}
	}
}

// TestHitDecodesByStepGraph: after a prefix-cache restore the draws go on
// as after the prefill itself — the first from the snapshot's logits (one
// upload), every decode step one start of the step graph already captured,
// with no parameter write, upload or new capture — and they are the cold
// run's draws, whether the restore adopted the KV rows or copied them.
func TestHitDecodesByStepGraph(t *testing.T) {
	plain := tinyEngine(t, runtime.NewCPU(), false)
	be := newStepBackend()
	e := tinyEngine(t, be, false)
	ctx := context.Background()
	s := runtime.DeviceSampling{Temperature: 0.8, TopK: 20, Seed: 3}
	toks := prompt(21, plain.Vocab())
	want, _ := deviceRun(t, plain, toks, 6, s)
	if got, _ := deviceRun(t, e, toks, 6, s); !slices.Equal(want, got) { // captures the graphs
		t.Fatalf("cold draws %v, CPU engine %v", got, want)
	}
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	logits, err := e.Prefill(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.Snapshot(logits)
	if err != nil {
		t.Fatal(err)
	}
	for _, round := range []string{"adopted", "after another prompt"} {
		if round == "after another prompt" {
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Prefill(ctx, prompt(9, 5), nil); err != nil {
				t.Fatal(err)
			}
		}
		r, err := e.Restore(snap)
		if err != nil {
			t.Fatal(err)
		}
		if adopted := r.Adopted > 0; adopted != (round == "adopted") {
			t.Errorf("%s: restore %+v", round, r)
		}
		captures, starts := be.captures, be.starts
		be.setParams, be.uploads = 0, 0
		tok, _, err := e.SampleLogits(ctx, snap.Logits(), s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if be.uploads != 1 {
			t.Errorf("%s: the first draw made %d uploads, want the logits' one", round, be.uploads)
		}
		got := []int32{tok}
		be.setParams, be.uploads = 0, 0
		for len(got) < len(want) {
			if tok, _, err = e.DecodeSampled(ctx, tok, s, len(got)); err != nil {
				t.Fatal(err)
			}
			got = append(got, tok)
		}
		if !slices.Equal(want, got) {
			t.Errorf("%s: draws %v, cold %v", round, got, want)
		}
		if be.captures != captures || be.starts-starts != len(want)-1 || be.setParams != 0 || be.uploads != 0 {
			t.Errorf("%s: %d captures, %d step graphs for %d steps, %d parameter writes, %d uploads: want 0, %d, 0, 0",
				round, be.captures-captures, be.starts-starts, len(want)-1, be.setParams, be.uploads, len(want)-1)
		}
	}
}
