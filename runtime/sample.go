package runtime

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// SamplerConfig chooses how the next token is drawn from logits.
type SamplerConfig struct {
	// Temperature 0 is greedy (argmax).
	Temperature float64
	TopK        int     // 0: no limit
	TopP        float64 // 0 or 1: no nucleus cut
	// MinP drops tokens whose probability is below MinP × the top one's.
	MinP float64
	// PresencePenalty and FrequencyPenalty subtract from the logits of
	// tokens already generated (once, and per occurrence); OpenAI semantics.
	PresencePenalty, FrequencyPenalty float64
	// RepetitionPenalty (> 0, 1 = off) divides positive and multiplies
	// negative logits of tokens in the prompt or the output.
	RepetitionPenalty float64
	Seed              uint64
	// VocabLimit masks ids at or above it (vocabulary padding rows); 0: none.
	VocabLimit int
}

// Sampler draws tokens; seeded, so a request is reproducible. It remembers
// the tokens it produced (and the prompt) for the penalties.
type Sampler struct {
	cfg    SamplerConfig
	rng    *rand.Rand
	counts map[int32]int  // generated tokens
	prompt map[int32]bool // prompt tokens, for the repetition penalty
}

// NewSampler validates the configuration.
func NewSampler(c SamplerConfig) (*Sampler, error) {
	var errs []error
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	if c.Temperature < 0 || bad(c.Temperature) {
		errs = append(errs, fmt.Errorf("temperature %v: want a finite value ≥ 0", c.Temperature))
	}
	if c.TopK < 0 {
		errs = append(errs, fmt.Errorf("top_k %d: want ≥ 0", c.TopK))
	}
	if c.TopP < 0 || c.TopP > 1 || bad(c.TopP) {
		errs = append(errs, fmt.Errorf("top_p %v: want 0 to 1", c.TopP))
	}
	if c.MinP < 0 || c.MinP > 1 || bad(c.MinP) {
		errs = append(errs, fmt.Errorf("min_p %v: want 0 to 1", c.MinP))
	}
	if bad(c.PresencePenalty) || bad(c.FrequencyPenalty) {
		errs = append(errs, errors.New("presence and frequency penalties must be finite"))
	}
	if c.RepetitionPenalty < 0 || bad(c.RepetitionPenalty) {
		errs = append(errs, fmt.Errorf("repetition_penalty %v: want > 0", c.RepetitionPenalty))
	}
	if c.VocabLimit < 0 {
		errs = append(errs, fmt.Errorf("vocab limit %d: want ≥ 0", c.VocabLimit))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Sampler{cfg: c, rng: rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15)),
		counts: map[int32]int{}, prompt: map[int32]bool{}}, nil
}

// SetPrompt tells the repetition penalty which tokens the prompt holds.
func (s *Sampler) SetPrompt(tokens []int32) {
	if c := s.cfg.RepetitionPenalty; c == 0 || c == 1 {
		return // only that penalty reads them: a 128K-token prompt's set is on its TTFT
	}
	for _, t := range tokens {
		s.prompt[t] = true
	}
}

// TokenLogprob is the log-probability of a chosen token under the model's
// distribution (before temperature and penalties), with the most likely
// alternatives.
type TokenLogprob struct {
	ID      int32
	Logprob float64
	Top     []Alternative
}

// Alternative is one of the most likely tokens at a position.
type Alternative struct {
	ID      int32
	Logprob float64
}

// Sample picks the next token id and records it.
func (s *Sampler) Sample(logits []float32) int32 {
	id, _ := s.SampleMasked(logits, nil)
	return id
}

// SampleLogprobs picks the next token and also returns its log-probability
// and the top alternatives (top ≤ 0: none).
func (s *Sampler) SampleLogprobs(logits []float32, top int) (int32, TokenLogprob) {
	id, lp, _ := s.SampleLogprobsMasked(logits, top, nil)
	return id, lp
}

// Mask is a set of token ids as a bitmask over the vocabulary: id t is in
// it when bit t%32 of word t/32 is set (the layout a device sampler reads).
// A nil Mask holds every id.
type Mask []uint32

// MaskWords is the length of a Mask over a vocabulary of n ids.
func MaskWords(n int) int { return (n + 31) / 32 }

// Has reports whether id t is in the mask; a nil mask has every id.
func (m Mask) Has(t int32) bool {
	if m == nil {
		return true
	}
	w := int(t) / 32
	return t >= 0 && w < len(m) && m[w]&(1<<(uint(t)%32)) != 0
}

// ErrMaskEmpty reports a mask that allows none of the ids the sampler may
// draw (those below the vocabulary limit with a finite logit).
var ErrMaskEmpty = errors.New("the token mask allows no token")

// SampleMasked picks the next token among those mask allows (nil: any)
// and records it. The penalties, temperature and cuts apply to the allowed
// tokens only, as if the others had a logit of -Inf.
func (s *Sampler) SampleMasked(logits []float32, mask Mask) (int32, error) {
	id, err := s.pick(logits, mask)
	if err != nil {
		return 0, err
	}
	s.counts[id]++
	return id, nil
}

// SampleLogprobsMasked is SampleMasked that also returns the token's
// log-probability and the top alternatives (top ≤ 0: none) under the
// model's own distribution, the mask not applied, as logprobs report it.
func (s *Sampler) SampleLogprobsMasked(logits []float32, top int, mask Mask) (int32, TokenLogprob, error) {
	lp := LogSoftmax(s.limit(logits))
	id, err := s.SampleMasked(logits, mask)
	if err != nil {
		return 0, TokenLogprob{}, err
	}
	out := TokenLogprob{ID: id, Logprob: lp[id]}
	if top > 0 {
		out.Top = TopLogprobs(lp, top)
	}
	return id, out, nil
}

func (s *Sampler) limit(logits []float32) []float32 {
	if v := s.cfg.VocabLimit; v > 0 && v < len(logits) {
		return logits[:v]
	}
	return logits
}

func (s *Sampler) pick(raw []float32, mask Mask) (int32, error) {
	logits := s.penalized(s.limit(raw))
	if mask != nil {
		logits = masked(logits, mask)
		if !anyFinite(logits) {
			return 0, ErrMaskEmpty
		}
	}
	if s.cfg.Temperature == 0 {
		return Argmax(logits), nil
	}
	type cand struct {
		id int32
		p  float64
	}
	cs := make([]cand, 0, len(logits))
	for i, l := range logits {
		if !math.IsNaN(float64(l)) && !math.IsInf(float64(l), -1) {
			cs = append(cs, cand{int32(i), float64(l) / s.cfg.Temperature})
		}
	}
	if len(cs) == 0 {
		return Argmax(logits), nil
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].p > cs[j].p })
	if k := s.cfg.TopK; k > 0 && k < len(cs) {
		cs = cs[:k]
	}
	top := cs[0].p
	var sum float64
	for i := range cs {
		cs[i].p = math.Exp(cs[i].p - top)
		sum += cs[i].p
	}
	if m := s.cfg.MinP; m > 0 {
		// cs[0].p is 1 after the shift: keep p ≥ MinP.
		n := len(cs)
		for n > 1 && cs[n-1].p < m {
			n--
		}
		cs = cs[:n]
	}
	if p := s.cfg.TopP; p > 0 && p < 1 {
		var cum float64
		for i := range cs {
			cum += cs[i].p / sum
			if cum >= p {
				cs = cs[:i+1]
				break
			}
		}
	}
	sum = 0
	for _, c := range cs {
		sum += c.p
	}
	r := s.rng.Float64() * sum
	for _, c := range cs {
		r -= c.p
		if r < 0 {
			return c.id, nil
		}
	}
	return cs[len(cs)-1].id, nil
}

// masked returns a copy of logits with the ids outside mask at -Inf.
func masked(logits []float32, mask Mask) []float32 {
	out := make([]float32, len(logits))
	ninf := float32(math.Inf(-1))
	for i, l := range logits {
		if mask.Has(int32(i)) {
			out[i] = l
		} else {
			out[i] = ninf
		}
	}
	return out
}

// anyFinite reports whether some logit can be drawn.
func anyFinite(logits []float32) bool {
	for _, l := range logits {
		if !math.IsNaN(float64(l)) && !math.IsInf(float64(l), -1) {
			return true
		}
	}
	return false
}

// penalized applies the repetition, presence and frequency penalties to a
// copy of the logits (unchanged when all are off).
func (s *Sampler) penalized(logits []float32) []float32 {
	c := s.cfg
	rep := c.RepetitionPenalty != 0 && c.RepetitionPenalty != 1
	if !rep && c.PresencePenalty == 0 && c.FrequencyPenalty == 0 {
		return logits
	}
	out := append([]float32(nil), logits...)
	if rep {
		apply := func(id int32) {
			if int(id) >= len(out) {
				return
			}
			if out[id] > 0 {
				out[id] = float32(float64(out[id]) / c.RepetitionPenalty)
			} else {
				out[id] = float32(float64(out[id]) * c.RepetitionPenalty)
			}
		}
		for id := range s.prompt {
			apply(id)
		}
		for id := range s.counts {
			if !s.prompt[id] {
				apply(id)
			}
		}
	}
	for id, n := range s.counts {
		if int(id) < len(out) {
			out[id] -= float32(c.PresencePenalty + c.FrequencyPenalty*float64(n))
		}
	}
	return out
}

// Argmax returns the first index of the largest logit, as torch.argmax does.
func Argmax(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] || (logits[best] != logits[best] && l == l) {
			best = i
		}
	}
	return int32(best)
}

// LogSoftmax is log(softmax(logits)) in float64.
func LogSoftmax(logits []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		if !math.IsNaN(float64(v)) {
			m = math.Max(m, float64(v))
		}
	}
	var sum float64
	for _, v := range logits {
		if !math.IsNaN(float64(v)) {
			sum += math.Exp(float64(v) - m)
		}
	}
	out := make([]float64, len(logits))
	lse := m + math.Log(sum)
	for i, v := range logits {
		if math.IsNaN(float64(v)) {
			out[i] = math.Inf(-1)
		} else {
			out[i] = float64(v) - lse
		}
	}
	return out
}

// TopLogprobs returns the n most likely ids, most likely first (ties: lower id).
func TopLogprobs(lp []float64, n int) []Alternative {
	out := make([]Alternative, 0, n+1)
	for i, v := range lp {
		if len(out) == n && v <= out[n-1].Logprob {
			continue
		}
		j := len(out)
		if j == n {
			j--
		} else {
			out = append(out, Alternative{})
		}
		for j > 0 && out[j-1].Logprob < v {
			out[j] = out[j-1]
			j--
		}
		out[j] = Alternative{ID: int32(i), Logprob: v}
	}
	return out
}
