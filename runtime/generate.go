package runtime

import (
	"context"
	"errors"
	"slices"
)

// Generate runs a prompt and decodes up to maxNew tokens, stopping after a
// token in stop (which is returned as the last id).
func (e *Engine) Generate(ctx context.Context, prompt []int32, maxNew int, s *Sampler, stop []int32) ([]int32, error) {
	if maxNew < 0 {
		return nil, errors.New("negative token budget")
	}
	if err := e.checkRoom(len(prompt) + max(maxNew-1, 0)); err != nil {
		return nil, err
	}
	logits, err := e.Prefill(ctx, prompt, nil)
	if err != nil {
		return nil, err
	}
	var out []int32
	for len(out) < maxNew {
		t := s.Sample(logits)
		out = append(out, t)
		if slices.Contains(stop, t) || len(out) == maxNew {
			break
		}
		if logits, err = e.Decode(ctx, t); err != nil {
			return out, err
		}
	}
	return out, nil
}
