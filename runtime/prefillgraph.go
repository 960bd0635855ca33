package runtime

import (
	"context"
	"fmt"
)

// A prefill bucket replays as captured graphs. Its launches read the
// segment's row count from the parameter block (a captured launch passes
// the slot, KernelABI 5) and its positions from the block's slots, so the
// graphs of a bucket, captured on its first segment, serve every segment
// of every length after it. A launch whose operand offset moves with a slot
// (the last row's LM head: its input row is n − 1) cannot be captured; it
// runs directly between the graphs. A backend that cannot capture them
// runs the launches one by one, as before.

// prefillGraphs holds the graphs of each bucket's phase.
type prefillGraphs struct {
	by     map[*phase][]prefillPiece
	failed error // the last capture's error; the buckets then launch one by one
}

// prefillPiece is launches [from, to) of a phase: a graph of them, or with
// g nil, launched directly.
type prefillPiece struct {
	g        Graph
	from, to int
}

func (p *prefillGraphs) drop() {
	for _, pieces := range p.by {
		for _, pc := range pieces {
			if pc.g != nil {
				pc.g.Destroy()
			}
		}
	}
	p.by, p.failed = nil, nil
}

// PrefillGraphs reports whether prefill buckets replay as graphs, and the
// error of a capture that failed (the buckets then run launch by launch).
func (e *Engine) PrefillGraphs() (bool, error) {
	return e.graphs && e.prefillGraphs.failed == nil, e.prefillGraphs.failed
}

// replayPrefill runs a prefill phase from its graphs, capturing them on
// first use.
func (e *Engine) replayPrefill(ctx context.Context, ph *phase) error {
	if e.prefillGraphs.failed != nil {
		return e.run(ctx, ph)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	pieces, ok := e.prefillGraphs.by[ph]
	if !ok {
		var err error
		if pieces, err = e.capturePrefill(ph); err != nil {
			e.prefillGraphs.failed = fmt.Errorf("capture prefill phase %s: %w", ph.p.Name, err)
			return e.run(ctx, ph)
		}
		if e.prefillGraphs.by == nil {
			e.prefillGraphs.by = map[*phase][]prefillPiece{}
		}
		e.prefillGraphs.by[ph] = pieces
	}
	if err := e.be.SetParams(&e.block); err != nil {
		return err
	}
	for _, pc := range pieces {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		var err error
		if pc.g != nil {
			err = pc.g.Replay()
		} else {
			err = e.launchRange(ctx, ph, pc.from, pc.to, nil, false, false)
		}
		if err != nil {
			return err
		}
	}
	return e.be.Sync()
}

// capturePrefill splits a phase's launches into runs that can be captured
// and the launches between them, and captures each run, with programmatic
// serialization where the decode step uses it.
func (e *Engine) capturePrefill(ph *phase) ([]prefillPiece, error) {
	gr, ok := e.be.(Grapher)
	if !ok {
		return nil, fmt.Errorf("backend %s cannot capture graphs", e.be.Name())
	}
	var pieces []prefillPiece
	n := len(ph.p.Launches)
	for i := 0; i < n; {
		j := i
		for j < n && capturable(ph, j) {
			j++
		}
		if j == i { // a launch with a moving offset: direct
			pieces = append(pieces, prefillPiece{from: i, to: i + 1})
			i++
			continue
		}
		from, to := i, j
		g, err := gr.Capture(func() error { return e.launchCaptured(ph, from, to) })
		if err != nil {
			for _, pc := range pieces {
				if pc.g != nil {
					pc.g.Destroy()
				}
			}
			return nil, err
		}
		pieces = append(pieces, prefillPiece{g: g, from: from, to: to})
		i = j
	}
	return pieces, nil
}

// capturable reports whether launch i's operands sit at fixed offsets.
func capturable(ph *phase, i int) bool {
	for _, a := range ph.args[i] {
		if a.dyn != nil {
			return false
		}
	}
	return true
}

// launchCaptured enqueues launches [from, to) for a capture, every launch
// but the first with programmatic serialization when the engine uses it.
func (e *Engine) launchCaptured(ph *phase, from, to int) error {
	return e.launchRange(context.Background(), ph, from, to, e.programmaticAfterFirst(), true, false)
}
