package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// The certified int8 LM head (docs/lm-head.md): the plan's decode_greedy
// phase is the decode step whose LM head streams int8 rows, recomputes the
// exact BF16 logit of every row its bound cannot rule out and writes the
// argmax, the BF16 head's greedy token bit for bit, to the tokens buffer
// and sampled. DecodeSampled uses it for greedy draws (temperature 0, no
// mask, no logprob needed) when it is on: by default on GPU targets; the
// CPU, the oracle, keeps the BF16 head unless SetCertifiedHead turns it on.

// CertifiedHeadStats count the certified head's steps since the engine was
// made: the candidates whose BF16 logits were recomputed and the steps that
// fell back to the full BF16 head (more candidate groups than the cap, or a
// bound that was not finite).
type CertifiedHeadStats struct {
	Steps      int64
	Candidates int64
	Fallbacks  int64
	// MaxCandidates is the most candidates of one step.
	MaxCandidates int64
}

// ErrNoCertifiedHead reports a plan without a decode_greedy phase.
var ErrNoCertifiedHead = errors.New("the plan has no decode_greedy phase (made before the certified int8 LM head)")

// SetCertifiedHead turns the certified int8 head for greedy draws on or
// off; both give the same tokens.
func (e *Engine) SetCertifiedHead(on bool) error {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	if on && (e.greedy == nil || e.sampler.phase == nil) {
		return ErrNoCertifiedHead
	}
	e.certified = on
	return nil
}

// CertifiedHead reports whether greedy draws use the certified int8 head.
func (e *Engine) CertifiedHead() bool { return e.certified }

// HeadStats returns the certified head's counts so far.
func (e *Engine) HeadStats() CertifiedHeadStats { return e.headStats }

// useCertified reports whether a draw with s takes the certified head:
// greedy, unmasked, without a logprob, and the head on.
func (e *Engine) useCertified(s DeviceSampling) bool {
	return e.certified && e.greedy != nil && s.Temperature == 0 && s.Mask == nil && !s.NeedLogprob
}

// decodeCertified runs the decode_greedy phase (tokens uploaded and the
// shape set by the caller) and reads back the token it left, with the
// certificate's candidates and fallback flag. The logprob is NaN.
func (e *Engine) decodeCertified(ctx context.Context, run func(context.Context, *phase) error, s DeviceSampling) (int32, float32, error) {
	e.block[ir.ParamVocabLimit] = int32(s.VocabLimit)
	e.sampler.fed = false
	if err := run(ctx, e.greedy); err != nil {
		e.broken = true
		return 0, 0, err
	}
	e.pos++
	e.noLogits = true
	var out [16]byte
	if err := e.be.Download(out[:], Ref{Mem: e.greedy.out[plan.PortSampled]}); err != nil {
		return 0, 0, err
	}
	return e.certifiedResult(out)
}

// decodeCertifiedStep is the certified greedy draw as one step graph
// (step.go): the parameter block and the token copied in, decode_greedy's
// launches, its 16 bytes (id, NaN, candidates, fallback) copied into
// pinned memory; the sampling slots (the vocabulary limit) are set.
func (e *Engine) decodeCertifiedStep(ctx context.Context, sg StepGrapher, token int32) (int32, float32, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, context.Cause(ctx)
	}
	e.sampler.fed = false
	var out [16]byte
	if err := e.runStep(sg, &e.stepGraphs.greedy, token, e.greedy.out[plan.PortSampled], out[:], e.greedy); err != nil {
		e.broken = !errors.Is(err, errNoStepGraph)
		return 0, 0, err
	}
	e.pos++
	e.noLogits = true
	return e.certifiedResult(out)
}

// certifiedResult is the token of the certified head's result (id, NaN
// logprob bits, candidates, fallback), its counts added to the stats. The
// logprob is NaN: the head computes no normalizer (the BF16 head serves
// draws that need one).
func (e *Engine) certifiedResult(out [16]byte) (int32, float32, error) {
	tok := int32(binary.LittleEndian.Uint32(out[:]))
	if tok < 0 || int(tok) >= e.plan.Model.Vocab {
		return 0, 0, fmt.Errorf("the certified head returned token %d, outside the vocabulary [0, %d)", tok, e.plan.Model.Vocab)
	}
	cands, fb := int64(int32(binary.LittleEndian.Uint32(out[8:]))), int64(int32(binary.LittleEndian.Uint32(out[12:])))
	e.headStats.Steps++
	e.headStats.Candidates += cands
	e.headStats.Fallbacks += fb
	e.headStats.MaxCandidates = max(e.headStats.MaxCandidates, cands)
	e.sampler.fed = e.greedy.out[plan.PortTokens] != nil && e.greedy.out[plan.PortTokens] == e.decode.in[plan.PortTokens]
	e.sampler.tok = tok
	return tok, float32(math.NaN()), nil
}

// ProfileGreedy is ProfileDecode for the certified greedy step: each
// launch i of the decode_greedy phase runs through each(i, run), never as
// a graph replay; it returns the greedy token (the BF16 head's) and leaves
// no logits.
func (e *Engine) ProfileGreedy(ctx context.Context, token int32, each func(i int, run func() error) error) (int32, error) {
	return e.profileGreedy(ctx, token, func(ctx context.Context, ph *phase) error { return e.launchEach(ctx, ph, each) })
}

// ProfileGreedyIn is ProfileDecodeIn for the certified greedy step: the
// decode_greedy phase's launches are handed to in, which must enqueue them
// once and have them run before it returns.
func (e *Engine) ProfileGreedyIn(ctx context.Context, token int32, in func(launches Launches) error) (int32, error) {
	return e.profileGreedy(ctx, token, func(ctx context.Context, ph *phase) error {
		return in(func(each func(i int, run func() error) error) error { return e.launchEach(ctx, ph, each) })
	})
}

// profileGreedy runs one certified greedy step with its launches enqueued
// by launch: the token uploaded, the shape and an unlimited vocabulary set,
// the parameter block written, then the 16-byte result read back.
func (e *Engine) profileGreedy(ctx context.Context, token int32, launch func(context.Context, *phase) error) (int32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer end()
	switch {
	case e.broken:
		return 0, ErrBroken
	case e.greedy == nil:
		return 0, ErrNoCertifiedHead
	}
	if err := e.checkRoom(1); err != nil {
		return 0, err
	}
	if err := e.checkIDs([]int32{token}); err != nil {
		return 0, err
	}
	var id [4]byte
	binary.LittleEndian.PutUint32(id[:], uint32(token))
	e.sampler.fed = false
	if err := e.be.Upload(Ref{Mem: e.greedy.in[plan.PortTokens]}, id[:]); err != nil {
		return 0, err
	}
	e.setShape(1)
	e.block[ir.ParamVocabLimit] = 0
	if err := e.be.SetParams(&e.block); err != nil {
		return 0, err
	}
	if err := launch(ctx, e.greedy); err != nil {
		e.broken = true
		return 0, err
	}
	if err := e.be.Sync(); err != nil {
		e.broken = true
		return 0, err
	}
	e.pos++
	e.noLogits = true
	var out [16]byte
	if err := e.be.Download(out[:], Ref{Mem: e.greedy.out[plan.PortSampled]}); err != nil {
		return 0, err
	}
	tok, _, err := e.certifiedResult(out)
	return tok, err
}
