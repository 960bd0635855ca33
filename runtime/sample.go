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
	Seed        uint64
	// VocabLimit masks ids at or above it (vocabulary padding rows); 0: none.
	VocabLimit int
}

// Sampler draws tokens; seeded, so a request is reproducible.
type Sampler struct {
	cfg SamplerConfig
	rng *rand.Rand
}

// NewSampler validates the configuration.
func NewSampler(c SamplerConfig) (*Sampler, error) {
	var errs []error
	if c.Temperature < 0 || math.IsNaN(c.Temperature) || math.IsInf(c.Temperature, 0) {
		errs = append(errs, fmt.Errorf("temperature %v: want a finite value ≥ 0", c.Temperature))
	}
	if c.TopK < 0 {
		errs = append(errs, fmt.Errorf("top_k %d: want ≥ 0", c.TopK))
	}
	if c.TopP < 0 || c.TopP > 1 || math.IsNaN(c.TopP) {
		errs = append(errs, fmt.Errorf("top_p %v: want 0 to 1", c.TopP))
	}
	if c.VocabLimit < 0 {
		errs = append(errs, fmt.Errorf("vocab limit %d: want ≥ 0", c.VocabLimit))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Sampler{cfg: c, rng: rand.New(rand.NewPCG(c.Seed, c.Seed^0x9e3779b97f4a7c15))}, nil
}

// Sample picks the next token id.
func (s *Sampler) Sample(logits []float32) int32 {
	v := len(logits)
	if s.cfg.VocabLimit > 0 && s.cfg.VocabLimit < v {
		v = s.cfg.VocabLimit
	}
	logits = logits[:v]
	if s.cfg.Temperature == 0 {
		return Argmax(logits)
	}
	type cand struct {
		id int32
		p  float64
	}
	cs := make([]cand, 0, v)
	for i, l := range logits {
		if !math.IsNaN(float64(l)) {
			cs = append(cs, cand{int32(i), float64(l) / s.cfg.Temperature})
		}
	}
	if len(cs) == 0 {
		return 0
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
	if p := s.cfg.TopP; p > 0 && p < 1 {
		var cum float64
		for i := range cs {
			cum += cs[i].p / sum
			if cum >= p {
				cs = cs[:i+1]
				break
			}
		}
		sum = 0
		for _, c := range cs {
			sum += c.p
		}
	}
	r := s.rng.Float64() * sum
	for _, c := range cs {
		r -= c.p
		if r < 0 {
			return c.id
		}
	}
	return cs[len(cs)-1].id
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
