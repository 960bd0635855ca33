package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// Engine holds a plan's resident state on a backend and runs its phases:
// prompts by bucket composition with state carried across segments, then
// decode steps. One engine serves one sequence at a time (batch 1).
type Engine struct {
	plan    *plan.Plan
	be      Backend
	globals map[string]Mem
	arena   Mem
	// fallbacks: the grid-barrier kernels the device cannot hold at once,
	// whose launches run as their fallbacks (residentPlan).
	fallbacks []string
	// persistentOn: the decode steps launch their persistent runs as one
	// launch each (SetPersistent); persistentMems are the runs' item
	// tables and sync blocks.
	persistentOn   bool
	persistentMems []Mem
	weights        []Mem

	prefill map[int]*phase // by bucket
	decode  *phase
	logits  *phase

	pos    int  // tokens already in the KV cache and states
	broken bool // a step failed midway: state is inconsistent until Reset

	// graphs replays the decode step as one captured graph on backends
	// that can (Grapher); decodeGraph is captured on the first decode.
	graphs      bool
	decodeGraph Graph
	// stepGraphs replace decodeGraph on StepGrapher backends (step.go).
	stepGraphs stepGraphs
	// prefillGraphs are the prefill buckets' graphs (prefillgraph.go).
	prefillGraphs prefillGraphs
	// block is the parameter block last handed to the backend.
	block Params
	// sampler is the sample phase (devsample.go).
	sampler deviceSampler
	// greedy is the decode step with the certified int8 LM head, used for
	// greedy draws when certified is on (lmhead.go); greedyGraph is its
	// captured graph.
	greedy      *phase
	greedyGraph Graph
	certified   bool
	// decodeTail: a prompt's last segment of at most this many tokens runs
	// as decode steps (tail.go).
	decodeTail int
	// noLogits: the last step was a certified greedy one, which leaves no
	// logits on the device.
	noLogits  bool
	headStats CertifiedHeadStats
	// life is the step lock Close waits on (lifetime.go).
	life lifetime
	// snaps is the device tier of snapshots (snapshot.go).
	snaps snapshots
	// held are the snapshots whose KV rows the KV cache still holds
	// (snapshot.go): restoring one of them copies only the states.
	held []*Snapshot
}

// phase is a plan phase with its kernels, buffers and ports resolved.
type phase struct {
	p       *plan.Phase
	kernels []*plan.Kernel
	args    [][]argRef
	locals  map[string]int64 // arena offsets
	// in and out are the memory of the ports the phase declares.
	in, out map[plan.Port]Mem
	// runs are the persistent runs of its launches, by their first launch
	// (persistent.go).
	runs map[int]*persistentRun
}

// argRef is a launch argument resolved to memory, before dynamic offsets.
type argRef struct {
	mem       Mem
	offset    int64
	dyn       *ir.Slot
	dynStride int64
}

// enginePorts are the ports the engine exchanges with each kind of phase:
// what it writes before running one (in) and reads after (out). A plan
// whose phases do not declare them is refused.
var enginePorts = map[plan.PhaseKind]struct{ in, out []plan.Port }{
	plan.Prefill:      {in: []plan.Port{plan.PortTokens}, out: []plan.Port{plan.PortLogits}},
	plan.DecodeStep:   {in: []plan.Port{plan.PortTokens}, out: []plan.Port{plan.PortLogits}},
	plan.Logits:       {out: []plan.Port{plan.PortLogitsRows}},
	plan.Sample:       {in: []plan.Port{plan.PortLogits}, out: []plan.Port{plan.PortSampled}},
	plan.DecodeGreedy: {in: []plan.Port{plan.PortTokens}, out: []plan.Port{plan.PortSampled}},
}

// ErrBroken reports use of an engine whose last step failed midway.
var ErrBroken = errors.New("engine state is inconsistent after a failed step; call Reset")

// NewEngine allocates the plan's buffers on the backend and binds weights.
// The plan must have been made for the backend's target.
func NewEngine(p *plan.Plan, be Backend, w Weights) (*Engine, error) {
	if string(p.Target) != be.Name() {
		return nil, fmt.Errorf("plan is for target %s, backend is %s", p.Target, be.Name())
	}
	if err := be.Load(p.Kernels); err != nil {
		return nil, err
	}
	p, fellBack, err := residentPlan(p, be)
	if err != nil {
		return nil, err
	}
	e := &Engine{plan: p, be: be, globals: map[string]Mem{}, prefill: map[int]*phase{}, fallbacks: fellBack}
	_, e.graphs = be.(Grapher)
	if p.Target.GPU() {
		e.decodeTail = DefaultDecodeTail
	}
	e.stepGraphs.pdl = e.canProgrammatic()
	if ib, ok := be.(Interruptible); ok {
		ib.SetInterrupt(e.interrupted)
	}
	if err := w.bind(e); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.deriveWeights(); err != nil {
		e.Close()
		return nil, err
	}
	for _, b := range p.Buffers {
		if b.Role == ir.Weight {
			continue
		}
		m, err := be.Alloc(b.Bytes)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("allocate %s (%d bytes): %w", b.Name, b.Bytes, err)
		}
		e.globals[b.Name] = m
	}
	arena, err := be.Alloc(max(p.ArenaBytes, 1))
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("allocate the arena (%d bytes): %w", p.ArenaBytes, err)
	}
	e.arena = arena
	kernels := map[string]*plan.Kernel{}
	for i := range p.Kernels {
		kernels[p.Kernels[i].Name] = &p.Kernels[i]
	}
	for i := range p.Phases {
		ph := &p.Phases[i]
		r := &phase{p: ph, locals: map[string]int64{}, in: map[plan.Port]Mem{}, out: map[plan.Port]Mem{}}
		for _, b := range ph.Buffers {
			r.locals[b.Name] = b.Offset
		}
		if err := e.bindPorts(r); err != nil {
			e.Close()
			return nil, err
		}
		for _, l := range ph.Launches {
			r.kernels = append(r.kernels, kernels[l.Kernel])
			var refs []argRef
			for _, a := range l.Args {
				ref := argRef{offset: a.Offset, dyn: a.Dyn, dynStride: a.DynStride}
				if off, ok := r.locals[a.Buffer]; ok {
					ref.mem, ref.offset = e.arena, off+a.Offset
				} else {
					ref.mem = e.globals[a.Buffer]
				}
				if ref.mem == nil {
					e.Close()
					return nil, fmt.Errorf("phase %s: buffer %s is not allocated", ph.Name, a.Buffer)
				}
				refs = append(refs, ref)
			}
			r.args = append(r.args, refs)
		}
		if ph.Kind.Decode() {
			if err := e.buildPersistent(r, kernels); err != nil {
				e.Close()
				return nil, err
			}
			e.persistentOn = e.persistentOn || len(r.runs) > 0
		}
		switch ph.Kind {
		case plan.Prefill:
			e.prefill[ph.Tokens] = r
		case plan.DecodeStep:
			e.decode = r
		case plan.Logits:
			e.logits = r
		case plan.Sample:
			e.sampler.phase = r
		case plan.DecodeGreedy:
			e.greedy = r
		}
	}
	// The certified head is on by default where the BF16 head is not the
	// oracle: on GPU targets.
	e.certified = e.greedy != nil && e.sampler.phase != nil && p.Target.GPU()
	if e.decode == nil || e.logits == nil || len(e.prefill) != len(p.Buckets) {
		e.Close()
		return nil, errors.New("plan lacks a decode, logits or prefill phase")
	}
	if err := e.Reset(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// residentPlan is p as backend be runs it: every launch whose family
// waits at a grid barrier (ir.Family.GridBarrier) and whose grid be's
// device cannot hold at once (Residency) replaced by its fallback
// launches, so that no launch can wait for blocks that never start; and
// the kernels so replaced, each once, in plan order. A backend that is no
// Residency (the CPU, which runs the references) runs p as it is.
func residentPlan(p *plan.Plan, be Backend) (*plan.Plan, []string, error) {
	r, ok := be.(Residency)
	if !ok {
		return p, nil, nil
	}
	var fellBack []string
	byName := map[string]*plan.Kernel{}
	for i := range p.Kernels {
		byName[p.Kernels[i].Name] = &p.Kernels[i]
	}
	var err error
	q := p.TakeFallbacks(func(ph *plan.Phase, l *plan.Launch) bool {
		k := byName[l.Kernel]
		if k == nil || err != nil {
			return false
		}
		if f, ferr := KernelFamily(k); ferr != nil || !f.GridBarrier {
			return false
		}
		resident, rerr := r.Resident(k, l)
		if rerr != nil {
			err = fmt.Errorf("phase %s: launch of %s: %w", ph.Name, l.Kernel, rerr)
		}
		take := rerr == nil && !resident
		if take && !slices.Contains(fellBack, l.Kernel) {
			fellBack = append(fellBack, l.Kernel)
		}
		return take
	})
	if err != nil {
		return nil, nil, err
	}
	return q, fellBack, nil
}

// Fallbacks are the plan's grid-barrier kernels whose grid this device
// cannot hold at once, so that their launches run as their fallback
// launches (plan.Launch.Fallback), each once, in plan order; none when
// every such grid fits or the plan has none.
func (e *Engine) Fallbacks() []string { return slices.Clone(e.fallbacks) }

// bindPorts resolves the ports a phase declares to their buffers and
// requires the ones the engine uses for the phase's kind.
func (e *Engine) bindPorts(r *phase) error {
	bind := func(ports []plan.Port, to map[plan.Port]Mem) error {
		for _, port := range ports {
			m := e.globals[string(port)]
			if m == nil {
				return fmt.Errorf("phase %s: port %s has no buffer", r.p.Name, port)
			}
			to[port] = m
		}
		return nil
	}
	if err := bind(r.p.Inputs, r.in); err != nil {
		return err
	}
	if err := bind(r.p.Outputs, r.out); err != nil {
		return err
	}
	need := enginePorts[r.p.Kind]
	for _, port := range need.in {
		if r.in[port] == nil {
			return fmt.Errorf("phase %s (%s) does not declare input %s, which the engine writes", r.p.Name, r.p.Kind, port)
		}
	}
	for _, port := range need.out {
		if r.out[port] == nil {
			return fmt.Errorf("phase %s (%s) does not declare output %s, which the engine reads", r.p.Name, r.p.Kind, port)
		}
	}
	return nil
}

// SetGraphs turns replay of the decode step and of the prefill buckets as
// captured graphs on or off (on by default where the backend can capture);
// both give the same logits.
func (e *Engine) SetGraphs(on bool) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return
	}
	defer end()
	_, can := e.be.(Grapher)
	e.graphs = on && can
	if !e.graphs {
		e.dropGraphs()
	}
}

// Graphs reports whether decode steps replay a captured graph.
func (e *Engine) Graphs() bool { return e.graphs }

func (e *Engine) dropGraphs() {
	e.stepGraphs.failed = nil // a later capture tries again
	for _, g := range []*Graph{&e.decodeGraph, &e.greedyGraph} {
		if *g != nil {
			(*g).Destroy()
			*g = nil
		}
	}
	e.stepGraphs.drop()
	e.prefillGraphs.drop()
}

// Plan returns the engine's plan.
func (e *Engine) Plan() *plan.Plan { return e.plan }

// Position is the number of tokens in the sequence so far.
func (e *Engine) Position() int { return e.pos }

// Capacity is the context window: prompt plus output tokens.
func (e *Engine) Capacity() int { return e.plan.ContextTokens }

// Vocab is the logits' width.
func (e *Engine) Vocab() int { return e.plan.Model.Vocab }

// Reset starts a new sequence: states and KV cache cleared.
func (e *Engine) Reset() error {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	for _, b := range e.plan.Buffers {
		if b.Role == ir.State || b.Role == ir.KV {
			if err := e.be.Zero(Ref{Mem: e.globals[b.Name]}, b.Bytes); err != nil {
				return err
			}
		}
	}
	e.pos, e.broken, e.noLogits, e.held = 0, false, false, nil
	return nil
}

// Segments splits a prompt of n tokens into prefill steps: the largest
// bucket while more than it remains, then the smallest bucket that holds the
// rest, run at its logical length (never token by token).
func Segments(n int, buckets []int) []Segment {
	var out []Segment
	largest := buckets[len(buckets)-1]
	for start := 0; start < n; {
		rest := n - start
		b := largest
		if rest < largest {
			for _, c := range buckets {
				if c >= rest {
					b = c
					break
				}
			}
		}
		m := min(rest, b)
		out = append(out, Segment{Start: start, Tokens: m, Bucket: b})
		start += m
	}
	return out
}

// Segment is one prefill step of a prompt.
type Segment struct{ Start, Tokens, Bucket int }

// RowsFunc receives teacher-forced logits: logits[i] predicts the token
// after the prompt's token start+i.
type RowsFunc func(start int, logits [][]float32) error

// Prefill appends tokens to the sequence and returns the logits that
// predict the next token. With rows set, it also hands over the logits of
// every prompt position. ctx is checked between segments and launches.
func (e *Engine) Prefill(ctx context.Context, tokens []int32, rows RowsFunc) ([]float32, error) {
	return e.prefillWith(ctx, tokens, rows, nil)
}

// prefillWith is Prefill with every step's launches handed to prof when it
// is not nil (ProfilePrefill), instead of replayed or launched directly.
func (e *Engine) prefillWith(ctx context.Context, tokens []int32, rows RowsFunc, prof PrefillSteps) ([]float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if len(tokens) == 0 {
		return nil, errors.New("prefill of an empty prompt")
	}
	// through runs one step of a profiled prefill, its phase and the
	// position filled in, with the step's launches handed to prof.
	through := func(ph *phase, toks []int32, st PrefillStep) ([]float32, error) {
		st.Phase, st.Pos = ph.p.Name, e.pos
		return e.stepThrough(ctx, ph, toks, func(l Launches) error { return prof(st, l) })
	}
	if err := e.checkRoom(len(tokens)); err != nil {
		return nil, err
	}
	if err := e.checkIDs(tokens); err != nil {
		return nil, err
	}
	var last []float32
	segs := Segments(len(tokens), e.plan.Buckets)
	for i, s := range segs {
		if err := ctx.Err(); err != nil {
			e.broken = s.Start > 0 // part of this prompt is in the state
			return nil, err
		}
		if rows == nil && i == len(segs)-1 && s.Tokens <= e.decodeTail {
			// A short last segment as decode steps (tail.go).
			for j, t := range tokens[s.Start:] {
				if err := ctx.Err(); err != nil {
					e.broken = s.Start+j > 0
					return nil, err
				}
				if prof != nil {
					last, err = through(e.decode, []int32{t}, PrefillStep{Segment: i, Kind: plan.DecodeStep, Start: s.Start + j, Tokens: 1})
				} else {
					last, err = e.decodeToken(ctx, t)
				}
				if err != nil {
					return nil, err
				}
			}
			break
		}
		ph, seg := e.prefill[s.Bucket], tokens[s.Start:s.Start+s.Tokens]
		var l []float32
		if prof != nil {
			l, err = through(ph, seg, PrefillStep{Segment: i, Kind: plan.Prefill, Start: s.Start, Tokens: s.Tokens})
		} else {
			l, err = e.step(ctx, ph, seg)
		}
		if err != nil {
			return nil, err
		}
		if rows != nil {
			if err := e.rowLogits(ctx, s.Start, s.Tokens, rows); err != nil {
				return nil, err
			}
		}
		last = l
	}
	return last, nil
}

// Decode feeds one token and returns the logits of the next.
func (e *Engine) Decode(ctx context.Context, token int32) ([]float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if err := e.checkRoom(1); err != nil {
		return nil, err
	}
	if err := e.checkIDs([]int32{token}); err != nil {
		return nil, err
	}
	return e.decodeToken(ctx, token)
}

// decodeToken is Decode after its checks: the step graph's replay where
// the backend has one, else the decode phase launch by launch.
func (e *Engine) decodeToken(ctx context.Context, token int32) ([]float32, error) {
	if sg, ok := e.stepping(); ok {
		logits, err := e.decodeStep(ctx, sg, token)
		if !errors.Is(err, errNoStepGraph) {
			return logits, err
		}
	}
	return e.step(ctx, e.decode, []int32{token})
}

// ProfileDecode is Decode run launch by launch, never as a graph replay:
// each launch i of the decode phase runs through each(i, run), which must
// call run once (a timer around it). The logits are Decode's.
func (e *Engine) ProfileDecode(ctx context.Context, token int32, each func(i int, run func() error) error) ([]float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if err := e.checkRoom(1); err != nil {
		return nil, err
	}
	if err := e.checkIDs([]int32{token}); err != nil {
		return nil, err
	}
	return e.stepThrough(ctx, e.decode, []int32{token}, func(l Launches) error { return l(each) })
}

// Launches enqueues a phase's launches (the decode step's, a prefill
// segment's), each launch i of the phase through each(i, run)
// (ProfileDecodeIn's and ProfilePrefill's hook).
type Launches func(each func(i int, run func() error) error) error

// ProfileDecodeIn is Decode with the decode phase's launches handed to in,
// which must enqueue them once (a graph capture with timing nodes between
// them, say: roofline.Profiler) and have them run before it returns. The
// token and the parameter block are on the device when in is called; the
// logits are Decode's.
func (e *Engine) ProfileDecodeIn(ctx context.Context, token int32, in func(launches Launches) error) ([]float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if err := e.checkRoom(1); err != nil {
		return nil, err
	}
	if err := e.checkIDs([]int32{token}); err != nil {
		return nil, err
	}
	return e.stepThrough(ctx, e.decode, []int32{token}, in)
}

// stepThrough is stepWith with the phase's launches handed to in, which
// must enqueue them once (each launch through its hook) and have them run;
// the parameter block is on the device when in is called.
func (e *Engine) stepThrough(ctx context.Context, ph *phase, tokens []int32, in func(launches Launches) error) ([]float32, error) {
	return e.stepWith(ph, tokens, func() error {
		if err := e.be.SetParams(&e.block); err != nil {
			return err
		}
		calls := 0
		launches := func(each func(i int, run func() error) error) error {
			calls++
			return e.launchEach(ctx, ph, each)
		}
		if err := in(launches); err != nil {
			return err
		}
		if calls != 1 {
			return fmt.Errorf("phase %s: its launches were enqueued %d times, want once", ph.p.Name, calls)
		}
		return e.be.Sync()
	})
}

func (e *Engine) checkRoom(n int) error {
	if e.pos+n > e.plan.ContextTokens {
		return fmt.Errorf("context full: %d tokens so far + %d exceed the %d-token context", e.pos, n, e.plan.ContextTokens)
	}
	return nil
}

func (e *Engine) checkIDs(tokens []int32) error {
	for i, t := range tokens {
		if t < 0 || int(t) >= e.plan.Model.Vocab {
			return fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", t, i, e.plan.Model.Vocab)
		}
	}
	return nil
}

// step runs a prefill or decode phase over tokens at the current position.
func (e *Engine) step(ctx context.Context, ph *phase, tokens []int32) ([]float32, error) {
	run := e.run
	switch {
	case ph == e.decode && e.graphs:
		run = e.replay
	case ph.p.Kind == plan.Prefill && e.graphs:
		run = e.replayPrefill
	}
	return e.stepWith(ph, tokens, func() error { return run(ctx, ph) })
}

// stepWith is step with the phase run by run, after the tokens' upload
// and the shape's slots.
func (e *Engine) stepWith(ph *phase, tokens []int32, run func() error) ([]float32, error) {
	n := len(tokens)
	ids := make([]byte, 4*n)
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(ids[4*i:], uint32(t))
	}
	e.sampler.fed = false // the sampler's token is overwritten
	if err := e.be.Upload(Ref{Mem: ph.in[plan.PortTokens]}, ids); err != nil {
		return nil, err
	}
	e.setShape(n)
	if err := run(); err != nil {
		e.broken = true
		return nil, err
	}
	e.pos += n
	e.noLogits = false
	return e.download(ph.out[plan.PortLogits], e.plan.Model.Vocab)
}

// setShape sets the slots of a prefill or decode step of n rows at the
// current position.
func (e *Engine) setShape(n int) {
	e.block[ir.ParamN] = int32(n)
	e.block[ir.ParamPos] = int32(e.pos)
	e.block[ir.ParamLast] = int32(n - 1)
}

// rowLogits runs the logits phase over hidden rows [0, count) of the last segment.
func (e *Engine) rowLogits(ctx context.Context, start, count int, fn RowsFunc) error {
	R, V := e.logits.p.Tokens, e.plan.Model.Vocab
	for r := 0; r < count; r += R {
		m := min(R, count-r)
		e.block[ir.ParamN], e.block[ir.ParamRow0] = int32(m), int32(r)
		if err := e.run(ctx, e.logits); err != nil {
			return err
		}
		flat, err := e.download(e.logits.out[plan.PortLogitsRows], m*V)
		if err != nil {
			return err
		}
		out := make([][]float32, m)
		for i := range out {
			out[i] = flat[i*V : (i+1)*V]
		}
		if err := fn(start+r, out); err != nil {
			return err
		}
	}
	return nil
}

// run hands the parameter block, as the caller set its slots, to the
// backend and runs the phase's launches.
func (e *Engine) run(ctx context.Context, ph *phase) error {
	if err := e.be.SetParams(&e.block); err != nil {
		return err
	}
	if err := e.launch(ctx, ph); err != nil {
		return err
	}
	return e.be.Sync()
}

// replay runs a decode phase (decode or decode_greedy) as a graph,
// capturing it on first use. The graph's launches have fixed arguments: the
// decode step always runs one row at offset 0, and its moving values (the
// position, the vocabulary limit) are read from the parameter block.
func (e *Engine) replay(ctx context.Context, ph *phase) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.be.SetParams(&e.block); err != nil {
		return err
	}
	graph := &e.decodeGraph
	if ph == e.greedy {
		graph = &e.greedyGraph
	}
	if *graph == nil {
		g, err := e.be.(Grapher).Capture(func() error { return e.launch(context.Background(), ph) })
		if err != nil {
			return fmt.Errorf("capture the %s step: %w", ph.p.Name, err)
		}
		*graph = g
	}
	if err := (*graph).Replay(); err != nil {
		return err
	}
	return e.be.Sync()
}

// launch enqueues a phase's launches: rows and dynamic offsets from the
// parameter block's slots.
func (e *Engine) launch(ctx context.Context, ph *phase) error {
	return e.launchRange(ctx, ph, 0, len(ph.p.Launches), nil, false, true)
}

// launchEach is launch with each launch i run through each(i, run) when
// each is not nil, every launch its own (the profiles time them one by
// one: a persistent run is launched launch by launch).
func (e *Engine) launchEach(ctx context.Context, ph *phase, each func(i int, run func() error) error) error {
	return e.launchRange(ctx, ph, 0, len(ph.p.Launches), each, false, false)
}

// launchRange enqueues launches [from, to) of a phase. captured launches
// pass a row count that comes from a parameter slot as the slot (−slot−1:
// the kernel reads it at run time, KernelABI 5), so a graph of them serves
// every count; their operand offsets must not depend on a slot.
//
// With persistent, a persistent run that starts at launch i and ends by to
// is one launch of its decode_persistent kernel, run through each(i, run).
func (e *Engine) launchRange(ctx context.Context, ph *phase, from, to int, each func(i int, run func() error) error, captured, persistent bool) error {
	refs := make([]Ref, 0, 8)
	for i := from; i < to; i++ {
		if ctx.Err() != nil {
			return context.Cause(ctx) // ErrClosed when Close cancelled the step
		}
		if pr := ph.runs[i]; persistent && e.persistentOn && pr != nil && pr.to <= to {
			run := func() error {
				return e.be.Launch(pr.kernel, &pr.launch, []Ref{{Mem: pr.table}, {Mem: pr.sync}}, 1, &e.block)
			}
			if err := through(each, i, run); err != nil {
				return fmt.Errorf("phase %s launches %d to %d (%s): %w", ph.p.Name, i, pr.to-1, pr.kernel.Name, err)
			}
			i = pr.to - 1
			continue
		}
		l := &ph.p.Launches[i]
		rows, err := e.bind(ph, i, captured, &refs)
		if err != nil {
			return err
		}
		run := func() error { return e.be.Launch(ph.kernels[i], l, refs, rows, &e.block) }
		if err := through(each, i, run); err != nil {
			return fmt.Errorf("phase %s launch %d (%s, layer %d): %w", ph.p.Name, i, l.Kernel, l.Layer, err)
		}
	}
	return nil
}

// through runs launch i's run through each when each is not nil.
func through(each func(i int, run func() error) error, i int, run func() error) error {
	if each != nil {
		return each(i, run)
	}
	return run()
}

// bind is launch i's row count and operands (into *refs, reused) as the
// parameter block holds them now, or, fixed (a graph's capture, an item
// table written once), with a row count from a slot passed as the slot
// (−slot−1, read by the kernel at run time: KernelABI 5) and no operand
// offset that moves with a slot.
func (e *Engine) bind(ph *phase, i int, fixed bool, refs *[]Ref) (int, error) {
	l := &ph.p.Launches[i]
	r, _ := ph.kernels[i].Params.Rows()
	rows := int(r)
	if l.Rows != nil {
		rows = int(e.block[*l.Rows])
		if fixed {
			rows = -int(*l.Rows) - 1
		}
	}
	*refs = (*refs)[:0]
	for _, a := range ph.args[i] {
		off := a.offset
		if a.dyn != nil {
			if fixed {
				return 0, fmt.Errorf("phase %s launch %d (%s): an operand offset from a slot cannot be captured", ph.p.Name, i, l.Kernel)
			}
			off += int64(e.block[*a.dyn]) * a.dynStride
		}
		*refs = append(*refs, Ref{Mem: a.mem, Offset: off})
	}
	return rows, nil
}

func (e *Engine) download(m Mem, count int) ([]float32, error) {
	raw := make([]byte, 4*count)
	if err := e.be.Download(raw, Ref{Mem: m}); err != nil {
		return nil, err
	}
	out := make([]float32, count)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// Close frees the engine's memory once no step uses it: it cancels the
// running step (inside a launch on backends that check, Interruptible),
// waits for it to return, then frees. Later calls fail with ErrClosed;
// Close is safe to call more than once and from any goroutine.
func (e *Engine) Close() error {
	if !e.shut() {
		return nil
	}
	e.dropGraphs()
	e.dropSnapshots()
	for _, m := range e.globals {
		e.be.Free(m)
	}
	for _, m := range e.weights {
		e.be.Free(m)
	}
	if e.arena != nil {
		e.be.Free(e.arena)
	}
	for _, m := range e.persistentMems {
		e.be.Free(m)
	}
	e.persistentMems = nil
	e.globals = nil
	return nil
}
