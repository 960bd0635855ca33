package openai

import (
	"encoding/json"
	"fmt"
	"math"
)

// CompletionRequest is a POST /v1/completions body.
type CompletionRequest struct {
	Model  string `json:"model"`
	Prompt Prompt `json:"prompt"`

	MaxTokens *int `json:"max_tokens,omitempty"`

	Sampling
	BestOf *int `json:"best_of,omitempty"`

	Stop          Stop           `json:"stop,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	Logprobs      *int           `json:"logprobs,omitempty"` // 0..20 alternatives per token
	Echo          bool           `json:"echo,omitempty"`
	User          string         `json:"user,omitempty"`
	// CachePrompt false keeps this request out of the prefix cache.
	CachePrompt *bool `json:"cache_prompt,omitempty"`
}

// Prompt is one completion prompt: text, or token ids when Tokens is non-nil.
type Prompt struct {
	Text   string
	Tokens []int32
}

// MarshalJSON writes the token ids or the text.
func (p Prompt) MarshalJSON() ([]byte, error) {
	if p.Tokens != nil {
		return json.Marshal(p.Tokens)
	}
	return marshalNoEscape(p.Text)
}

// IsEmpty reports a prompt with no text and no tokens.
func (p Prompt) IsEmpty() bool { return p.Text == "" && len(p.Tokens) == 0 }

// completionUnsupported lists legacy completion fields this server does not
// implement, with the values that ask for nothing.
var completionUnsupported = map[string]unsupportedCheck{
	"suffix":     emptyOnly("insertion (suffix) is not supported"),
	"logit_bias": emptyOnly("logit_bias is not supported"),
}

// DecodeCompletionRequest strictly decodes and validates a completions body.
func DecodeCompletionRequest(body []byte) (*CompletionRequest, *Error) {
	root, err := parseRoot(body)
	if err != nil {
		return nil, err
	}
	r := &CompletionRequest{}
	err = fields(root, "", func(key string, v *node, p string) *Error {
		if known, err := r.Sampling.decodeField(key, v, p); known {
			return err
		}
		var err *Error
		switch key {
		case "model":
			r.Model, err = str(v, p)
		case "prompt":
			r.Prompt, err = decodePrompt(v, p)
		case "max_tokens":
			r.MaxTokens, err = optInt(v, p)
		case "best_of":
			r.BestOf, err = optInt(v, p)
		case "stop":
			r.Stop, err = decodeStop(v, p)
		case "stream":
			r.Stream, err = boolean(v, p)
		case "stream_options":
			r.StreamOptions, err = decodeStreamOptions(v, p)
		case "logprobs":
			r.Logprobs, err = optInt(v, p)
		case "echo":
			r.Echo, err = boolean(v, p)
		case "user":
			r.User, err = str(v, p)
		case "cache_prompt":
			r.CachePrompt, err = optBool(v, p)
		default:
			if check, ok := completionUnsupported[key]; ok {
				return check(v, p)
			}
			return unknownParam(p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// decodePrompt reads a string or token ids; a one-element array of either is
// that prompt, a longer one is a batch, which is not supported.
func decodePrompt(n *node, path string) (Prompt, *Error) {
	switch n.kind {
	case kNull:
		return Prompt{}, nil
	case kString:
		return Prompt{Text: n.str}, nil
	case kArray:
	default:
		return Prompt{}, typeError(path, "a string or an array of token ids", n)
	}
	if n.length() == 0 {
		return Prompt{}, InvalidRequest(path, "'prompt' must not be empty.")
	}
	if n.ints != nil {
		return decodeTokens(n, path)
	}
	switch first := n.items()[0]; first.kind {
	case kString, kArray:
		if n.length() > 1 {
			return Prompt{}, Unsupported(path, fmt.Sprintf("Batched prompts are not supported: send one prompt per request, got %d.", n.length()))
		}
		if first.kind == kString {
			return Prompt{Text: first.str}, nil
		}
		return decodeTokens(first, at(path, 0))
	}
	return decodeTokens(n, path)
}

// decodeTokens reads an array of token ids.
func decodeTokens(n *node, path string) (Prompt, *Error) {
	ids, err := tokenIDs(n, path)
	if err != nil {
		return Prompt{}, err
	}
	if len(ids) == 0 {
		return Prompt{}, InvalidRequest(path, "'prompt' must not be empty.")
	}
	return Prompt{Tokens: ids}, nil
}

// tokenIDs reads an array of non-negative token ids.
func tokenIDs(n *node, path string) ([]int32, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	if n.kind != kArray {
		return nil, typeError(path, "an array", n)
	}
	ids := make([]int32, 0, n.length())
	if n.ints != nil { // plain integers: no node to read
		for i, id := range n.ints {
			if id < 0 || id > math.MaxInt32 {
				return nil, InvalidRequest(at(path, i), fmt.Sprintf("Invalid token id %d.", id))
			}
			ids = append(ids, int32(id))
		}
		return ids, nil
	}
	// Each element's path is made only for its error: a long prompt is
	// 128K ids.
	for i, v := range n.items() {
		id, err := integer(v, path)
		if err != nil {
			return nil, typeError(at(path, i), "a token id (an integer)", v)
		}
		if id < 0 || id > math.MaxInt32 {
			return nil, InvalidRequest(at(path, i), fmt.Sprintf("Invalid token id %d.", id))
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// Validate checks the values of a request that decoded, reporting the first
// problem with its path.
func (r *CompletionRequest) Validate() *Error {
	if r.Model == "" {
		return InvalidRequest("model", "'model' is required.")
	}
	if r.Prompt.IsEmpty() {
		return InvalidRequest("prompt", "'prompt' is required and must not be empty.")
	}
	for i, id := range r.Prompt.Tokens {
		if id < 0 {
			return InvalidRequest(at("prompt", i), fmt.Sprintf("Invalid token id %d.", id))
		}
	}
	if err := positive(r.MaxTokens, "max_tokens"); err != nil {
		return err
	}
	if err := r.Sampling.Validate(); err != nil {
		return err
	}
	if r.BestOf != nil {
		if *r.BestOf < 1 {
			return InvalidRequest("best_of", fmt.Sprintf("'best_of' must be 1, got %d.", *r.BestOf))
		}
		if *r.BestOf > 1 {
			return Unsupported("best_of", fmt.Sprintf("'best_of' must be 1: one candidate per request is generated, got %d.", *r.BestOf))
		}
	}
	if err := validateStop(r.Stop, "stop"); err != nil {
		return err
	}
	if r.StreamOptions != nil && !r.Stream {
		return InvalidRequest("stream_options", "'stream_options' is only allowed when 'stream' is true.")
	}
	if r.Logprobs != nil && (*r.Logprobs < 0 || *r.Logprobs > MaxTopLogprobs) {
		return InvalidRequest("logprobs", fmt.Sprintf("'logprobs' must be between 0 and %d, got %d.", MaxTopLogprobs, *r.Logprobs))
	}
	return nil
}

// MaxNewTokens returns max_tokens; set is false when the client left it out
// (OpenAI's default for completions is 16, the server's choice here).
func (r *CompletionRequest) MaxNewTokens() (n int, set bool) {
	if r.MaxTokens != nil {
		return *r.MaxTokens, true
	}
	return 0, false
}

// StopStrings returns the stop strings, nil when none.
func (r *CompletionRequest) StopStrings() []string {
	if len(r.Stop) == 0 {
		return nil
	}
	return append([]string(nil), r.Stop...)
}
