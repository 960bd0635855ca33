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

// Sampling on the device: the plan's sample phase draws the next token from
// the logits where they are (kernels.Sample defines the draw) and writes it
// into the tokens input buffer, so only the id and its logprob cross to the
// host, and the next decode step reads the token without a host round trip.
//
// The phase's dynamic values are the sampling slots of the parameter block
// (setSlots), which every backend's sample kernel reads:
//
//	seed_lo, seed_hi   the seed's low and high 32 bits
//	step               the draw's index under the seed (uint32)
//	temperature_bits   float32 bits of the temperature (0: greedy)
//	top_p_bits         float32 bits of top_p (a cut when in (0, 1))
//	min_p_bits         float32 bits of min_p (a cut when > 0)
//	top_k              top_k (a cut when > 0)
//	vocab_limit        ids at or above it are masked (0: none)
//	masked             1: the sample_mask input restricts the draw

// DeviceSampling is what the device sampler does: temperature, top_k, top_p,
// min_p, a seed and the vocabulary limit. Penalties and logit biases need
// the host Sampler. The draw is a pure function of (logits, seed, step), so
// a seed reproduces a generation; it is not the host Sampler's stream.
type DeviceSampling struct {
	Temperature float32 // 0: greedy
	TopP        float32 // 0 or 1: no nucleus cut
	MinP        float32 // 0: no cut
	TopK        int     // 0: no limit
	Seed        uint64
	// VocabLimit masks ids at or above it (vocabulary padding rows); 0: none.
	VocabLimit int
	// Mask restricts the draw to its ids (constrained decoding); nil: none.
	// It is uploaded to the sample_mask input only for a draw that has one;
	// the logprob stays the model's own, unmasked.
	Mask Mask
	// NeedLogprob says the caller uses the drawn token's logprob: a greedy
	// draw then keeps the BF16 head, since the certified int8 head
	// computes no normalizer (its logprob is NaN).
	NeedLogprob bool
}

// Validate checks the values are ones the device sampler takes.
func (s DeviceSampling) Validate() error {
	var errs []error
	bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }
	if s.Temperature < 0 || bad(s.Temperature) {
		errs = append(errs, fmt.Errorf("temperature %v: want a finite value ≥ 0", s.Temperature))
	}
	if s.TopP < 0 || s.TopP > 1 || bad(s.TopP) {
		errs = append(errs, fmt.Errorf("top_p %v: want 0 to 1", s.TopP))
	}
	if s.MinP < 0 || s.MinP > 1 || bad(s.MinP) {
		errs = append(errs, fmt.Errorf("min_p %v: want 0 to 1", s.MinP))
	}
	if s.TopK < 0 || s.TopK > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("top_k %d: want 0 to %d", s.TopK, math.MaxInt32))
	}
	if s.VocabLimit < 0 || s.VocabLimit > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("vocab limit %d: want 0 to %d", s.VocabLimit, math.MaxInt32))
	}
	return errors.Join(errs...)
}

// DeviceSamplingFor converts a host sampler configuration; ok is false when
// it asks for what only the host Sampler does (presence, frequency or
// repetition penalties).
func DeviceSamplingFor(c SamplerConfig) (s DeviceSampling, ok bool) {
	if c.PresencePenalty != 0 || c.FrequencyPenalty != 0 || (c.RepetitionPenalty != 0 && c.RepetitionPenalty != 1) {
		return DeviceSampling{}, false
	}
	return DeviceSampling{Temperature: float32(c.Temperature), TopP: float32(c.TopP), MinP: float32(c.MinP),
		TopK: c.TopK, Seed: c.Seed, VocabLimit: c.VocabLimit}, true
}

// setSlots writes the sampling slots of draw step into the block.
func (s DeviceSampling) setSlots(b *Params, step int) {
	u := func(v uint32) int32 { return int32(v) }
	b[ir.ParamSeedLo] = u(uint32(s.Seed))
	b[ir.ParamSeedHi] = u(uint32(s.Seed >> 32))
	b[ir.ParamStep] = u(uint32(step))
	b[ir.ParamTemperature] = u(math.Float32bits(s.Temperature))
	b[ir.ParamTopP] = u(math.Float32bits(s.TopP))
	b[ir.ParamMinP] = u(math.Float32bits(s.MinP))
	b[ir.ParamTopK] = int32(s.TopK)
	b[ir.ParamVocabLimit] = int32(s.VocabLimit)
	b[ir.ParamMasked] = 0
	if s.Mask != nil {
		b[ir.ParamMasked] = 1
	}
}

// deviceSampler is the engine's sample phase and what it left on the
// device.
type deviceSampler struct {
	phase *phase
	// fed: element 0 of the device's tokens buffer holds tok, written by
	// the sampler, and no step has uploaded tokens since.
	fed bool
	tok int32
}

// ErrNoSampler reports a plan without a sample phase (made before there
// was one).
var ErrNoSampler = errors.New("the plan has no sample phase; use the host sampler")

// CanSample reports whether the plan samples on the device.
func (e *Engine) CanSample() bool { return e.sampler.phase != nil }

// SampleNext draws the next token from the logits the last Prefill or
// Decode step left on the device (draw step under s.Seed) and returns it
// with its logprob; only those 8 bytes are read back. The token is also
// left in the tokens buffer for DecodeSampled. After Restore the device
// holds no logits of the snapshot: use SampleLogits.
func (e *Engine) SampleNext(ctx context.Context, s DeviceSampling, step int) (int32, float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer end()
	if err := e.sampleReady(s); err != nil {
		return 0, 0, err
	}
	if e.pos == 0 {
		return 0, 0, errors.New("sample before any prefill: no logits")
	}
	if e.noLogits {
		return 0, 0, errors.New("the last step was a certified greedy step, which leaves no logits on the device; draw with DecodeSampled")
	}
	return e.sample(ctx, s, step)
}

// SampleLogits copies logits (one row of the vocabulary, a restored
// snapshot's, say) to the device and draws from them as SampleNext does.
func (e *Engine) SampleLogits(ctx context.Context, logits []float32, s DeviceSampling, step int) (int32, float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer end()
	if err := e.sampleReady(s); err != nil {
		return 0, 0, err
	}
	if len(logits) != e.plan.Model.Vocab {
		return 0, 0, fmt.Errorf("%d logits, the vocabulary has %d", len(logits), e.plan.Model.Vocab)
	}
	raw := make([]byte, 4*len(logits))
	for i, l := range logits {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(l))
	}
	if err := e.be.Upload(Ref{Mem: e.sampler.phase.in[plan.PortLogits]}, raw); err != nil {
		return 0, 0, err
	}
	return e.sample(ctx, s, step)
}

// DecodeSampled feeds token, runs one decode step and draws the token
// after it (draw step) without reading the logits back. When token is the
// one the sampler last left in the tokens buffer, nothing is copied to the
// device at all.
func (e *Engine) DecodeSampled(ctx context.Context, token int32, s DeviceSampling, step int) (int32, float32, error) {
	ctx, end, err := e.begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer end()
	if err := e.sampleReady(s); err != nil {
		return 0, 0, err
	}
	if err := e.checkRoom(1); err != nil {
		return 0, 0, err
	}
	if err := e.checkIDs([]int32{token}); err != nil {
		return 0, 0, err
	}
	if sg, ok := e.stepping(); ok {
		if err := e.uploadMask(s); err != nil {
			return 0, 0, err
		}
		e.setShape(1)
		s.setSlots(&e.block, step)
		draw := e.decodeSampledStep
		if e.useCertified(s) {
			draw = e.decodeCertifiedStep // one graph: decode with the int8 head, certify, pick
		}
		tok, lp, err := draw(ctx, sg, token)
		if !errors.Is(err, errNoStepGraph) {
			return tok, lp, err
		}
	}
	if !e.sampler.fed || e.sampler.tok != token {
		var id [4]byte
		binary.LittleEndian.PutUint32(id[:], uint32(token))
		if err := e.be.Upload(Ref{Mem: e.decode.in[plan.PortTokens]}, id[:]); err != nil {
			return 0, 0, err
		}
	}
	e.setShape(1)
	run := e.run
	if e.graphs {
		run = e.replay
	}
	if e.useCertified(s) {
		return e.decodeCertified(ctx, run, s)
	}
	if err := run(ctx, e.decode); err != nil {
		e.broken = true
		return 0, 0, err
	}
	e.pos++
	e.noLogits = false
	return e.sample(ctx, s, step)
}

func (e *Engine) sampleReady(s DeviceSampling) error {
	if e.sampler.phase == nil {
		return ErrNoSampler
	}
	if e.broken {
		return ErrBroken
	}
	return s.Validate()
}

// uploadMask copies a draw's mask to the sample phase's mask input (only a
// constrained draw has one).
func (e *Engine) uploadMask(s DeviceSampling) error {
	if s.Mask == nil {
		return nil
	}
	if want := MaskWords(e.plan.Model.Vocab); len(s.Mask) != want {
		return fmt.Errorf("a mask of %d words, the vocabulary needs %d", len(s.Mask), want)
	}
	buf := e.sampler.phase.in[plan.PortSampleMask]
	if buf == nil {
		return errors.New("the plan's sample phase takes no mask (made before constrained decoding); use the host sampler")
	}
	raw := make([]byte, 4*len(s.Mask))
	for i, w := range s.Mask {
		binary.LittleEndian.PutUint32(raw[4*i:], w)
	}
	return e.be.Upload(Ref{Mem: buf}, raw)
}

// sample runs the sample phase and reads back the id and logprob.
func (e *Engine) sample(ctx context.Context, s DeviceSampling, step int) (int32, float32, error) {
	if err := e.uploadMask(s); err != nil {
		return 0, 0, err
	}
	e.sampler.fed = false
	s.setSlots(&e.block, step)
	if err := e.run(ctx, e.sampler.phase); err != nil {
		return 0, 0, err
	}
	var out [8]byte
	if err := e.be.Download(out[:], Ref{Mem: e.sampler.phase.out[plan.PortSampled]}); err != nil {
		return 0, 0, err
	}
	return e.sampled(out)
}

// sampled checks the sample phase's id and logprob and notes whether the
// id is left where the next decode step reads its token.
func (e *Engine) sampled(out [8]byte) (int32, float32, error) {
	tok := int32(binary.LittleEndian.Uint32(out[:]))
	if tok < 0 || int(tok) >= e.plan.Model.Vocab {
		return 0, 0, fmt.Errorf("the sampler returned token %d, outside the vocabulary [0, %d)", tok, e.plan.Model.Vocab)
	}
	// The sampler's token is the next decode step's input when it writes
	// the buffer that step reads.
	e.sampler.fed = e.sampler.phase.out[plan.PortTokens] != nil && e.sampler.phase.out[plan.PortTokens] == e.decode.in[plan.PortTokens]
	e.sampler.tok = tok
	return tok, math.Float32frombits(binary.LittleEndian.Uint32(out[4:])), nil
}
