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

// DeviceSampler is implemented by engines that draw the next token on the
// device (*runtime.Engine, when its plan has a sample phase): only the token
// and its logprob cross to the host, and a decode step reads the token
// where the sampler wrote it. The server uses it for requests that need
// nothing only the host Sampler does; engines without it (the tests'
// scripted ones) sample on the host.
type DeviceSampler interface {
	CanSample() bool
	// SampleLogits draws from logits (the prompt's last, as the host has
	// them: a restored snapshot's as well as a fresh prefill's).
	SampleLogits(ctx context.Context, logits []float32, s runtime.DeviceSampling, step int) (int32, float32, error)
	// DecodeSampled feeds token and draws the one after it.
	DecodeSampled(ctx context.Context, token int32, s runtime.DeviceSampling, step int) (int32, float32, error)
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
