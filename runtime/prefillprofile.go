package runtime

import (
	"context"
	"errors"

	"github.com/aimaproject/aimac/plan"
)

// PrefillStep is one step of a profiled prefill (ProfilePrefill): a
// bucket's prefill phase over one segment of the prompt, or one token of a
// short last segment that Prefill runs as a decode step (SetDecodeTail).
type PrefillStep struct {
	// Segment is the step's index in Segments(len(prompt), buckets).
	Segment int
	// Phase is the plan phase that runs, Kind its kind: plan.Prefill, or
	// plan.DecodeStep for a token of the decode tail.
	Phase string
	Kind  plan.PhaseKind
	// Start is the step's first token in the prompt, Tokens how many it
	// runs (1 for a decode step), Pos the sequence's position before it.
	Start, Tokens, Pos int
}

// PrefillSteps receives each step of a profiled prefill with its launches,
// which it must enqueue once and have run before it returns.
type PrefillSteps func(s PrefillStep, launches Launches) error

// ProfilePrefill is Prefill without rows run launch by launch, never as
// graph replays: every step Prefill takes — each segment's prefill phase,
// and each token of a last segment short enough for the decode tail as a
// decode step, exactly as Prefill does — is handed to step with its
// launches. The token upload and the parameter block precede step, and
// the engine waits for the device and reads the step's logits after it, as
// Prefill does between segments. The logits are Prefill's.
func (e *Engine) ProfilePrefill(ctx context.Context, tokens []int32, step PrefillSteps) ([]float32, error) {
	if step == nil {
		return nil, errors.New("profile of a prefill without a step hook")
	}
	return e.prefillWith(ctx, tokens, nil, step)
}
