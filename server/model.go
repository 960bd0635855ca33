// Package server is the OpenAI-compatible HTTP API of aima-engine: chat and
// text completions, the Responses API, tokenization, health, readiness and
// metrics, served by one engine worker (batch 1) behind a bounded FIFO queue.
package server

import (
	"context"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/tokenizer"
)

// Engine is what the server needs of the runtime: one sequence at a time.
// *runtime.Engine implements it; tests drive the server through a scripted
// engine whose logits spell out a chosen answer.
type Engine interface {
	Reset() error
	Prefill(ctx context.Context, tokens []int32, rows runtime.RowsFunc) ([]float32, error)
	Decode(ctx context.Context, token int32) ([]float32, error)
	Capacity() int
	Vocab() int
}

// Model is everything served: the engine and the checkpoint's own
// tokenizer and chat template.
type Model struct {
	ID        string
	Engine    Engine
	Tokenizer *tokenizer.Tokenizer
	Template  *chat.Template
	// StopIDs end a turn (<|im_end|>, <|endoftext|>): counted, never shown.
	StopIDs []int32
	// VocabLimit masks vocabulary padding ids (the tokenizer's size).
	VocabLimit int
	// Target names the backend, for /health and the readiness line.
	Target string
	// Sampling holds the model's generation defaults (generation_config.json)
	// for what a request leaves out.
	Sampling runtime.SamplerConfig
}
