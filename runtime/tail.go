package runtime

import (
	"context"
	"fmt"
)

// DefaultDecodeTail is the longest last segment of a prompt that an engine
// of a GPU plan (CUDA, HIP) runs as decode steps instead of a prefill step. A prefill step of a few tokens
// costs nearly a whole bucket's fixed work — every one of its launches, the
// grouped MoE's tiles, the GDN state pass — while a decode step is one
// graph replay: on the H200 (full model, through the server) a 1-token
// prompt took 45 ms to its first token and 8 tokens 55 ms, against ≈ 3 ms a
// decode step; a chat turn's generation prompt (≈ 4 tokens after the turn
// boundary's snapshot) and the one token past a bucket edge are such tails.
// 16 decode steps (≈ 45 ms) stay below a short prefill's cost. The cpu
// engine, the oracle, keeps its prefill (0).
const DefaultDecodeTail = 16

// SetDecodeTail sets the longest last segment of a prompt that Prefill runs
// as decode steps (0: never). Prefill with rows (teacher-forced logits of
// every position) always prefills. The decode step's logits are the
// prefill's up to its kernels' own rounding (both are held to the same
// oracle).
func (e *Engine) SetDecodeTail(n int) error {
	if n < 0 || n > e.plan.Buckets[len(e.plan.Buckets)-1] {
		return fmt.Errorf("decode tail %d: want 0 to the largest bucket, %d", n, e.plan.Buckets[len(e.plan.Buckets)-1])
	}
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	e.decodeTail = n
	return nil
}

// DecodeTail reports the longest last segment Prefill runs as decode steps.
func (e *Engine) DecodeTail() int { return e.decodeTail }
