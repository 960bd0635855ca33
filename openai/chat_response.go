package openai

import "math"

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
)

// Object names.
const (
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectTextCompletion      = "text_completion"
	ObjectList                = "list"
	ObjectModel               = "model"
	ObjectResponse            = "response"
)

// ChatCompletion is a non-streamed chat completion.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []ChatChoice `json:"choices"`
	Usage             Usage        `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

// ChatChoice is the one choice of a chat completion.
type ChatChoice struct {
	Index        int         `json:"index"`
	Message      ChatMessage `json:"message"`
	Logprobs     *Logprobs   `json:"logprobs"` // null unless requested
	FinishReason string      `json:"finish_reason"`
}

// ChatMessage is the assistant message of a choice. Content is null when the
// message is only tool calls; Refusal is always null (sent because OpenAI does).
type ChatMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// NewChatMessage returns the assistant message for the decoded output:
// content null when it is empty and there are tool calls.
func NewChatMessage(content, reasoning string, calls []ToolCall) ChatMessage {
	m := ChatMessage{Role: "assistant", ReasoningContent: reasoning, ToolCalls: calls}
	if content != "" || len(calls) == 0 {
		m.Content = &content
	}
	return m
}

// NewChatCompletion returns a completion with one choice.
func NewChatCompletion(id, model string, created int64, msg ChatMessage, logprobs *Logprobs, finish string, usage Usage) ChatCompletion {
	return ChatCompletion{
		ID: id, Object: ObjectChatCompletion, Created: created, Model: model,
		Choices:           []ChatChoice{{Index: 0, Message: msg, Logprobs: logprobs, FinishReason: finish}},
		Usage:             usage,
		SystemFingerprint: SystemFingerprint,
	}
}

// SystemFingerprint is the system_fingerprint of every response.
const SystemFingerprint = "fp_aima"

// Usage is the token usage of a request. EOS counts as a completion token.
type Usage struct {
	PromptTokens            int                      `json:"prompt_tokens"`
	CompletionTokens        int                      `json:"completion_tokens"`
	TotalTokens             int                      `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails      `json:"prompt_tokens_details"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails breaks the prompt tokens down.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"` // served from the prefix cache
}

// CompletionTokensDetails breaks the completion tokens down.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// NewUsage returns the usage of prompt and completion tokens, cached of the
// prompt tokens having come from the prefix cache.
func NewUsage(prompt, completion, cached int) Usage {
	return Usage{
		PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: PromptTokensDetails{CachedTokens: cached},
	}
}

// Logprobs are a choice's token log probabilities.
type Logprobs struct {
	Content []TokenLogprob `json:"content"`
	Refusal []TokenLogprob `json:"refusal"` // always null
}

// TokenLogprob is one output token with its most likely alternatives.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative of a token.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// minLogprob stands in for -Inf, which JSON cannot carry (vLLM sends the same).
const minLogprob = -9999.0

// finiteLogprob maps a log probability JSON cannot carry to minLogprob.
func finiteLogprob(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) || f < minLogprob {
		return minLogprob
	}
	return f
}

// MarshalJSON writes the token with finite log probabilities and an empty,
// never null, list of alternatives.
func (t TokenLogprob) MarshalJSON() ([]byte, error) {
	type plain TokenLogprob
	t.Logprob = finiteLogprob(t.Logprob)
	if t.TopLogprobs == nil {
		t.TopLogprobs = []TopLogprob{}
	}
	return marshalNoEscape(plain(t))
}

// MarshalJSON writes the alternative with a finite log probability.
func (t TopLogprob) MarshalJSON() ([]byte, error) {
	type plain TopLogprob
	t.Logprob = finiteLogprob(t.Logprob)
	return marshalNoEscape(plain(t))
}

// TokenBytes returns the UTF-8 bytes of a token's text as OpenAI lists them.
func TokenBytes(token []byte) []int {
	out := make([]int, len(token))
	for i, b := range token {
		out[i] = int(b)
	}
	return out
}

// ChatCompletionChunk is one streamed chat completion chunk.
type ChatCompletionChunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *Usage        `json:"usage,omitempty"` // only on the usage chunk
}

// ChunkChoice is the one choice of a chunk; FinishReason is null until the
// last chunk.
type ChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChunkDelta `json:"delta"`
	Logprobs     *Logprobs  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

// ChunkDelta is what a chunk adds to the message. Tool call deltas carry
// their index, the id, type and name first, then argument fragments.
type ChunkDelta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatChunker makes the chunks of one streamed chat completion.
type ChatChunker struct {
	ID      string
	Model   string
	Created int64
}

// chunk returns a chunk with the given choices.
func (c ChatChunker) chunk(choices []ChunkChoice) ChatCompletionChunk {
	return ChatCompletionChunk{ID: c.ID, Object: ObjectChatCompletionChunk, Created: c.Created, Model: c.Model,
		SystemFingerprint: SystemFingerprint, Choices: choices}
}

// Role returns the first chunk: the assistant role and empty content.
func (c ChatChunker) Role() ChatCompletionChunk {
	empty := ""
	return c.chunk([]ChunkChoice{{Delta: ChunkDelta{Role: "assistant", Content: &empty}}})
}

// Content returns a chunk of answer text, with its tokens' logprobs if any.
func (c ChatChunker) Content(text string, logprobs *Logprobs) ChatCompletionChunk {
	return c.chunk([]ChunkChoice{{Delta: ChunkDelta{Content: &text}, Logprobs: logprobs}})
}

// Reasoning returns a chunk of reasoning text, with its tokens' logprobs if any.
func (c ChatChunker) Reasoning(text string, logprobs *Logprobs) ChatCompletionChunk {
	return c.chunk([]ChunkChoice{{Delta: ChunkDelta{ReasoningContent: &text}, Logprobs: logprobs}})
}

// ToolCallStart returns the chunk that opens tool call index: its id, type
// and function name, with empty arguments.
func (c ChatChunker) ToolCallStart(index int, id, name string) ChatCompletionChunk {
	call := ToolCall{Index: &index, ID: id, Type: "function", Function: FunctionCall{Name: name}}
	return c.chunk([]ChunkChoice{{Delta: ChunkDelta{ToolCalls: []ToolCall{call}}}})
}

// ToolCallArguments returns a chunk with a fragment of tool call index's
// arguments.
func (c ChatChunker) ToolCallArguments(index int, fragment string) ChatCompletionChunk {
	call := ToolCall{Index: &index, Function: FunctionCall{Arguments: fragment}}
	return c.chunk([]ChunkChoice{{Delta: ChunkDelta{ToolCalls: []ToolCall{call}}}})
}

// Finish returns the last chunk of the choice: an empty delta and the finish
// reason.
func (c ChatChunker) Finish(reason string) ChatCompletionChunk {
	return c.chunk([]ChunkChoice{{FinishReason: &reason}})
}

// Usage returns the usage chunk sent before [DONE] when the client asked for
// it: no choices.
func (c ChatChunker) Usage(u Usage) ChatCompletionChunk {
	ch := c.chunk([]ChunkChoice{})
	ch.Usage = &u
	return ch
}

// Completion is a legacy text completion, or one chunk of a streamed one.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"` // always when not streamed; streamed, only on the usage chunk
}

// CompletionChoice is the one choice of a completion; FinishReason is null in
// stream chunks until the last.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionLogprobs are legacy logprobs: parallel lists over the tokens.
// TokenLogprobs has a nil entry for an echoed first prompt token (no
// probability), TopLogprobs nil entries where there are none.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// MarshalJSON writes the lists with finite log probabilities and never a
// null list.
func (l CompletionLogprobs) MarshalJSON() ([]byte, error) {
	type plain CompletionLogprobs
	out := plain{Tokens: l.Tokens, TextOffset: l.TextOffset}
	if out.Tokens == nil {
		out.Tokens = []string{}
	}
	if out.TextOffset == nil {
		out.TextOffset = []int{}
	}
	out.TokenLogprobs = make([]*float64, len(l.TokenLogprobs))
	for i, p := range l.TokenLogprobs {
		if p != nil {
			f := finiteLogprob(*p)
			out.TokenLogprobs[i] = &f
		}
	}
	out.TopLogprobs = make([]map[string]float64, len(l.TopLogprobs))
	for i, m := range l.TopLogprobs {
		if m != nil {
			out.TopLogprobs[i] = make(map[string]float64, len(m))
			for k, v := range m {
				out.TopLogprobs[i][k] = finiteLogprob(v)
			}
		}
	}
	return marshalNoEscape(out)
}

// NewCompletion returns a non-streamed completion with one choice.
func NewCompletion(id, model string, created int64, text string, logprobs *CompletionLogprobs, finish string, usage Usage) Completion {
	return Completion{
		ID: id, Object: ObjectTextCompletion, Created: created, Model: model, SystemFingerprint: SystemFingerprint,
		Choices: []CompletionChoice{{Index: 0, Text: text, Logprobs: logprobs, FinishReason: &finish}},
		Usage:   &usage,
	}
}

// NewCompletionChunk returns one chunk of a streamed completion; finish is ""
// until the last chunk.
func NewCompletionChunk(id, model string, created int64, text string, logprobs *CompletionLogprobs, finish string) Completion {
	c := CompletionChoice{Index: 0, Text: text, Logprobs: logprobs}
	if finish != "" {
		c.FinishReason = &finish
	}
	return Completion{ID: id, Object: ObjectTextCompletion, Created: created, Model: model,
		SystemFingerprint: SystemFingerprint, Choices: []CompletionChoice{c}}
}

// NewCompletionUsageChunk returns the usage chunk of a streamed completion.
func NewCompletionUsageChunk(id, model string, created int64, usage Usage) Completion {
	return Completion{ID: id, Object: ObjectTextCompletion, Created: created, Model: model,
		SystemFingerprint: SystemFingerprint, Choices: []CompletionChoice{}, Usage: &usage}
}

// ModelList is the GET /v1/models body.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// ModelCard describes a served model; MaxModelLen is the real context length.
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

// NewModelCard returns the card of a served model.
func NewModelCard(id, ownedBy string, created int64, maxModelLen int) ModelCard {
	return ModelCard{ID: id, Object: ObjectModel, Created: created, OwnedBy: ownedBy, MaxModelLen: maxModelLen}
}

// NewModelList returns the list of the given models.
func NewModelList(cards ...ModelCard) ModelList {
	if cards == nil {
		cards = []ModelCard{}
	}
	return ModelList{Object: ObjectList, Data: cards}
}
