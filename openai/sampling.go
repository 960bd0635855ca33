package openai

import "fmt"

// Sampling is the sampling fields every generation request shares (chat
// completions, completions, responses), declared, decoded and validated
// once. Pointers mark fields whose absence differs from their zero value:
// what a request leaves out comes from the model's generation defaults.
type Sampling struct {
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	MinP              *float64 `json:"min_p,omitempty"`
	PresencePenalty   *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64 `json:"frequency_penalty,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	TopK              *int     `json:"top_k,omitempty"`
	Seed              *int64   `json:"seed,omitempty"`
	N                 *int     `json:"n,omitempty"`
	// SkipSpecialTokens false keeps the vocabulary's control tokens
	// (<|fim_pad|>, a stray </think>…) in the output text; by default they
	// are left out, as HuggingFace and vLLM do.
	SkipSpecialTokens *bool `json:"skip_special_tokens,omitempty"`
}

// decodeField reads key into s when it is a sampling field; known is false
// for any other key, which the request's own decoder then reads.
func (s *Sampling) decodeField(key string, v *node, p string) (known bool, err *Error) {
	switch key {
	case "temperature":
		s.Temperature, err = optFloat(v, p)
	case "top_p":
		s.TopP, err = optFloat(v, p)
	case "min_p":
		s.MinP, err = optFloat(v, p)
	case "presence_penalty":
		s.PresencePenalty, err = optFloat(v, p)
	case "frequency_penalty":
		s.FrequencyPenalty, err = optFloat(v, p)
	case "repetition_penalty":
		s.RepetitionPenalty, err = optFloat(v, p)
	case "top_k":
		s.TopK, err = optInt(v, p)
	case "seed":
		s.Seed, err = optInt64(v, p)
	case "n":
		s.N, err = optInt(v, p)
	case "skip_special_tokens":
		s.SkipSpecialTokens, err = optBool(v, p)
	default:
		return false, nil
	}
	return true, err
}

// Validate checks sampling bounds: OpenAI's where it has them, vLLM's
// otherwise.
func (s *Sampling) Validate() *Error {
	checks := []struct {
		v      *float64
		name   string
		lo, hi float64
		loOpen bool
	}{
		{s.Temperature, "temperature", 0, 2, false},
		{s.TopP, "top_p", 0, 1, true},
		{s.MinP, "min_p", 0, 1, false},
		{s.PresencePenalty, "presence_penalty", -2, 2, false},
		{s.FrequencyPenalty, "frequency_penalty", -2, 2, false},
		{s.RepetitionPenalty, "repetition_penalty", 0, 2, true},
	}
	for _, c := range checks {
		if c.v == nil {
			continue
		}
		v := *c.v
		if v < c.lo || v > c.hi || c.loOpen && v == c.lo {
			lo := "["
			if c.loOpen {
				lo = "("
			}
			return InvalidRequest(c.name, fmt.Sprintf("'%s' must be in %s%g, %g], got %g.", c.name, lo, c.lo, c.hi, v))
		}
	}
	if s.TopK != nil && *s.TopK < -1 {
		return InvalidRequest("top_k", fmt.Sprintf("'top_k' must be -1 or 0 (disabled) or a positive count, got %d.", *s.TopK))
	}
	if s.N != nil {
		if *s.N < 1 {
			return InvalidRequest("n", fmt.Sprintf("'n' must be 1, got %d.", *s.N))
		}
		if *s.N > 1 {
			return Unsupported("n", fmt.Sprintf("'n' must be 1: one choice per request is supported, got %d.", *s.N))
		}
	}
	return nil
}
