package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/aimaproject/aimac/plan"
)

// One graph replay per token. On a backend that can capture a step with its
// host exchange (StepGrapher), a decode step is one graph: the parameter
// block and the token copied from pinned host memory, the decode phase's
// launches, with the sample phase's after them when the device samples,
// then the result copied into pinned host memory — the sampled id and its
// logprob (8 bytes), or the logits when the caller wants them (Decode). The
// host writes nothing to the device before a step and waits only for that
// result; the logits never cross when the device samples.
//
// On sm_90 the launches of these graphs but the first are made with
// programmatic stream serialization (docs/pdl.md): each kernel's blocks may
// start while the launch before it finishes, and wait in the kernel
// (PDL_WAIT) for its results.

// stepGraphs are an engine's captured steps.
type stepGraphs struct {
	logits StepGraph // decode → logits
	sample StepGraph // decode + sample → id and logprob
	// greedy: decode_greedy → id, NaN, candidates, fallback (16 bytes):
	// the decode step with the certified int8 LM head, its pick on the
	// device (lmhead.go).
	greedy StepGraph
	// pdl: capture the launches with programmatic serialization; pdlErr is
	// why a capture with them failed (they are then off).
	pdl    bool
	pdlErr error
	// failed is why a step graph could not be captured at all: decode
	// steps then replay the launches-only graph (Grapher) as before.
	failed error
}

// errNoStepGraph: the step graph could not be captured; nothing ran.
var errNoStepGraph = errors.New("no step graph")

func (s *stepGraphs) drop() {
	for _, g := range []*StepGraph{&s.logits, &s.sample, &s.greedy} {
		if *g != nil {
			(*g).Destroy()
			*g = nil
		}
	}
}

// canProgrammatic reports whether the plan's target and the backend run
// launches with programmatic serialization.
func (e *Engine) canProgrammatic() bool {
	_, ok := e.be.(AttrLauncher)
	return ok && e.plan.Target.Programmatic()
}

// SetProgrammatic turns programmatic dependent launch in the decode step's
// graphs on or off (on by default where the target and backend have it);
// the output is the same either way.
func (e *Engine) SetProgrammatic(on bool) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return
	}
	defer end()
	on = on && e.canProgrammatic()
	if on != e.stepGraphs.pdl {
		e.dropGraphs()
		e.stepGraphs.pdl = on
	}
	e.stepGraphs.pdlErr = nil
}

// Programmatic reports whether the decode step's graphs use programmatic
// dependent launch, and, when a capture with it failed and it was turned
// off, that capture's error.
func (e *Engine) Programmatic() (bool, error) { return e.stepGraphs.pdl, e.stepGraphs.pdlErr }

// stepping reports whether decode steps run as step graphs.
func (e *Engine) stepping() (StepGrapher, bool) {
	sg, ok := e.be.(StepGrapher)
	return sg, ok && e.graphs && e.stepGraphs.failed == nil
}

// StepGraphs reports whether decode steps run as one step graph each, and,
// when capturing one failed (the steps then replay the launches alone),
// that capture's error.
func (e *Engine) StepGraphs() (bool, error) {
	_, on := e.stepping()
	return on, e.stepGraphs.failed
}

// launchSteps enqueues the launches of phases in order, every launch but
// the first with programmatic serialization when the engine uses it (the
// first follows the graph's copies, which are no launch to overlap).
func (e *Engine) launchSteps(phases ...*phase) error {
	ctx := context.Background()
	each := e.programmaticAfterFirst()
	for _, ph := range phases {
		if err := e.launchRange(ctx, ph, 0, len(ph.p.Launches), each, false, true); err != nil {
			return err
		}
	}
	return nil
}

// programmaticAfterFirst is a launch hook that runs the first launch it
// sees plainly and every later one with programmatic serialization, when
// the engine uses it (the decode step's graphs and the prefill graphs).
func (e *Engine) programmaticAfterFirst() func(int, func() error) error {
	al, _ := e.be.(AttrLauncher)
	first := true
	return func(_ int, run func() error) error {
		if !e.stepGraphs.pdl || first || al == nil {
			first = false
			return run()
		}
		return al.WithLaunchAttrs(LaunchAttrs{ProgrammaticSerialization: true}, run)
	}
}

// runStep starts the step graph *g (capturing it first with phases, the
// result read from out) on the engine's block with token as the input (the
// tokens buffer the first phase reads) and waits for its result.
func (e *Engine) runStep(sg StepGrapher, g *StepGraph, token int32, out Mem, result []byte, phases ...*phase) error {
	if *g == nil {
		capture := func() (StepGraph, error) {
			return sg.CaptureStep(func() error { return e.launchSteps(phases...) },
				Ref{Mem: phases[0].in[plan.PortTokens]}, 4, Ref{Mem: out}, int64(len(result)))
		}
		c, err := capture()
		if err != nil && e.stepGraphs.pdl {
			// A driver that cannot capture programmatic launches still runs
			// the step: without them, which Programmatic then reports.
			e.stepGraphs.pdl, e.stepGraphs.pdlErr = false, err
			c, err = capture()
		}
		if err != nil {
			e.stepGraphs.failed = fmt.Errorf("capture the decode step with its copies: %w", err)
			return errNoStepGraph
		}
		*g = c
	}
	var id [4]byte
	binary.LittleEndian.PutUint32(id[:], uint32(token))
	if err := (*g).Start(&e.block, id[:]); err != nil {
		return err
	}
	return (*g).Wait(result)
}

// decodeStep is Decode as one step graph: the logits come back through
// pinned memory.
func (e *Engine) decodeStep(ctx context.Context, sg StepGrapher, token int32) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	e.sampler.fed = false // the token is overwritten
	e.setShape(1)
	V := e.plan.Model.Vocab
	raw := make([]byte, 4*V)
	if err := e.runStep(sg, &e.stepGraphs.logits, token, e.decode.out[plan.PortLogits], raw, e.decode); err != nil {
		e.broken = !errors.Is(err, errNoStepGraph)
		return nil, err
	}
	e.pos++
	e.noLogits = false
	out := make([]float32, V)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// decodeSampledStep is DecodeSampled as one step graph; the sampling slots
// and the mask are set.
func (e *Engine) decodeSampledStep(ctx context.Context, sg StepGrapher, token int32) (int32, float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, context.Cause(ctx)
	}
	e.sampler.fed = false
	var out [8]byte
	if err := e.runStep(sg, &e.stepGraphs.sample, token, e.sampler.phase.out[plan.PortSampled], out[:], e.decode, e.sampler.phase); err != nil {
		e.broken = !errors.Is(err, errNoStepGraph)
		return 0, 0, err
	}
	e.pos++
	e.noLogits = false
	return e.sampled(out)
}
