package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ChatRequest is a POST /v1/chat/completions body. Pointers mark fields whose
// absence differs from their zero value.
type ChatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`

	Sampling

	MaxTokens           *int `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int `json:"max_completion_tokens,omitempty"`
	Stop                Stop `json:"stop,omitempty"`

	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`

	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs *int `json:"top_logprobs,omitempty"`

	Tools             []Tool      `json:"tools,omitempty"`
	ToolChoice        *ToolChoice `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`

	// ResponseFormat is decoded and checked for shape only; the server must
	// enforce json_object and json_schema or refuse them.
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`

	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs,omitempty"` // an object
	ReasoningEffort    *string         `json:"reasoning_effort,omitempty"`
	// MaxThinkingTokens is thinking_budget: the most reasoning tokens before
	// the server closes the reasoning and the answer begins.
	MaxThinkingTokens *int `json:"thinking_budget,omitempty"`

	User string `json:"user,omitempty"`
	// CachePrompt false keeps this request out of the prefix cache: it
	// neither restores from nor adds to it (default true).
	CachePrompt *bool           `json:"cache_prompt,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"` // an object of strings
	Store       *bool           `json:"store,omitempty"`
}

// Message is one chat message.
type Message struct {
	Role             string     `json:"role"` // system, developer, user, assistant, tool
	Content          Content    `json:"content"`
	Name             string     `json:"name,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Reasoning        *string    `json:"reasoning,omitempty"` // input alias of ReasoningContent
}

// Tool is a tool the model may call; only function tools exist here.
type Tool struct {
	Type     string      `json:"type"` // "function"
	Function FunctionDef `json:"function"`

	raw json.RawMessage // the tool as the client sent it (compact), if it came from a request
}

// FunctionDef describes a function tool. Strict is accepted; arguments are
// not constrained to the schema.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON Schema object, key order kept
	Strict      *bool           `json:"strict,omitempty"`
}

// MarshalJSON writes the tool exactly as the client sent it when it came from
// a request (so the chat template prints the client's key order), else in
// OpenAI's canonical form.
func (t Tool) MarshalJSON() ([]byte, error) {
	if t.raw != nil {
		return t.raw, nil
	}
	type plain Tool
	return json.Marshal(plain(t))
}

// ToolChoice is "none", "auto", "required" or a named function.
type ToolChoice struct {
	Mode string // none, auto, required, function
	Name string // the function, when Mode is "function"
}

// Tool choice modes.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// MarshalJSON writes the chat form: a mode string ("auto" for the zero
// value), or {"type":"function","function":{"name":…}}.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	switch c.Mode {
	case ToolChoiceFunction:
		fn := orderedObject{}
		fn.add("name", c.Name)
		o := orderedObject{}
		o.add("type", "function")
		o.add("function", fn)
		return o.marshal()
	case "":
		return json.Marshal(ToolChoiceAuto)
	}
	return json.Marshal(c.Mode)
}

// ToolCall is a call the assistant made. Index is set only in stream deltas.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function and arguments of a tool call; Arguments is a
// JSON object encoded as a string, as OpenAI sends it.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Stop is a list of stop strings; the wire accepts a string or an array.
type Stop []string

// StreamOptions are the options of a streamed response.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage,omitempty"`
}

// ResponseFormat is the requested output format.
type ResponseFormat struct {
	Type       string      `json:"type"` // text, json_object, json_schema
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is the schema of a json_schema response format.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Valid roles and reasoning efforts.
var (
	messageRoles     = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}
	reasoningEfforts = map[string]bool{"none": true, "minimal": true, "low": true, "medium": true, "high": true}
)

// chatUnsupported lists OpenAI chat fields this server does not implement,
// with the values that ask for nothing and are therefore accepted.
var chatUnsupported = map[string]unsupportedCheck{
	"audio":                  nullOnly("audio output is not supported"),
	"modalities":             textModalities,
	"prediction":             nullOnly("predicted outputs are not supported"),
	"web_search_options":     nullOnly("web search is not supported"),
	"functions":              nullOnly("the legacy 'functions' parameter is not supported; use 'tools'"),
	"function_call":          nullOnly("the legacy 'function_call' parameter is not supported; use 'tool_choice'"),
	"logit_bias":             emptyOnly("logit_bias is not supported"),
	"service_tier":           serviceTier,
	"verbosity":              nullOnly("verbosity control is not supported"),
	"prompt_cache_key":       nullOnly("prompt cache routing is not supported; the prefix cache is automatic"),
	"prompt_cache_retention": nullOnly("prompt cache retention is not configurable"),
	"prompt_cache_options":   nullOnly("prompt cache options are not configurable"),
	"safety_identifier":      nullOnly("safety identifiers are not supported"),
	"moderation":             nullOnly("moderation is not supported"),
}

// DecodeChatRequest strictly decodes and validates a chat completions body.
func DecodeChatRequest(body []byte) (*ChatRequest, *Error) {
	root, err := parseRoot(body)
	if err != nil {
		return nil, err
	}
	r := &ChatRequest{}
	if err := r.decode(root); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// decode reads the fields of the request object.
func (r *ChatRequest) decode(root *node) *Error {
	return fields(root, "", func(key string, v *node, p string) *Error {
		if known, err := r.Sampling.decodeField(key, v, p); known {
			return err
		}
		var err *Error
		switch key {
		case "model":
			r.Model, err = str(v, p)
		case "messages":
			r.Messages, err = decodeMessages(v, p)
		case "max_tokens":
			r.MaxTokens, err = optInt(v, p)
		case "max_completion_tokens":
			r.MaxCompletionTokens, err = optInt(v, p)
		case "stop":
			r.Stop, err = decodeStop(v, p)
		case "stream":
			r.Stream, err = boolean(v, p)
		case "stream_options":
			r.StreamOptions, err = decodeStreamOptions(v, p)
		case "logprobs":
			r.Logprobs, err = boolean(v, p)
		case "top_logprobs":
			r.TopLogprobs, err = optInt(v, p)
		case "tools":
			r.Tools, err = decodeTools(v, p)
		case "tool_choice":
			r.ToolChoice, err = decodeToolChoice(v, p, false)
		case "parallel_tool_calls":
			r.ParallelToolCalls, err = optBool(v, p)
		case "response_format":
			r.ResponseFormat, err = decodeResponseFormat(v, p)
		case "chat_template_kwargs":
			r.ChatTemplateKwargs, err = object(v, p)
		case "reasoning_effort":
			r.ReasoningEffort, err = optStr(v, p)
		case "thinking_budget":
			r.MaxThinkingTokens, err = optInt(v, p)
		case "user":
			r.User, err = str(v, p)
		case "cache_prompt":
			r.CachePrompt, err = optBool(v, p)
		case "metadata":
			r.Metadata, err = object(v, p)
		case "store":
			r.Store, err = optBool(v, p)
		default:
			if check, ok := chatUnsupported[key]; ok {
				return check(v, p)
			}
			return unknownParam(p)
		}
		return err
	})
}

// decodeMessages reads the messages array.
func decodeMessages(n *node, path string) ([]Message, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	msgs := make([]Message, 0, n.length())
	err := elems(n, path, func(i int, v *node, p string) *Error {
		m, err := decodeMessage(v, p)
		msgs = append(msgs, m)
		return err
	})
	return msgs, err
}

// decodeMessage reads one chat message. Fields an echoed OpenAI response
// message carries (refusal, annotations, audio, function_call) are accepted
// while they ask for nothing.
func decodeMessage(n *node, path string) (Message, *Error) {
	var m Message
	err := fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "role":
			m.Role, err = str(v, p)
		case "content":
			m.Content, err = decodeContent(v, p, chatParts)
		case "name":
			m.Name, err = str(v, p)
		case "tool_calls":
			m.ToolCalls, err = decodeToolCalls(v, p)
		case "tool_call_id":
			m.ToolCallID, err = str(v, p)
		case "reasoning_content":
			m.ReasoningContent, err = optStr(v, p)
		case "reasoning":
			m.Reasoning, err = optStr(v, p)
		case "refusal":
			err = emptyOnly("refusals cannot be replayed to this model")(v, p)
		case "annotations":
			err = emptyOnly("annotations cannot be replayed to this model")(v, p)
		case "audio":
			err = nullOnly("audio is not supported")(v, p)
		case "function_call":
			err = nullOnly("the legacy 'function_call' is not supported; use 'tool_calls'")(v, p)
		default:
			err = unknownParam(p)
		}
		return err
	})
	return m, err
}

// decodeToolCalls reads an assistant message's tool calls. A call without a
// type is a function call.
func decodeToolCalls(n *node, path string) ([]ToolCall, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	calls := make([]ToolCall, 0, n.length())
	err := elems(n, path, func(i int, v *node, p string) *Error {
		t, err := typeOf(v, p)
		if err != nil {
			return err
		}
		if t != "" && t != "function" {
			return Unsupported(join(p, "type"), fmt.Sprintf("Tool call type '%s' is not supported; only 'function'.", t))
		}
		c := ToolCall{Type: "function"}
		err = fields(v, p, func(key string, v *node, p string) *Error {
			var err *Error
			switch key {
			case "type":
			case "id":
				c.ID, err = str(v, p)
			case "index":
				c.Index, err = optInt(v, p)
			case "function":
				err = fields(v, p, func(key string, v *node, p string) *Error {
					var err *Error
					switch key {
					case "name":
						c.Function.Name, err = str(v, p)
					case "arguments":
						c.Function.Arguments, err = str(v, p)
					default:
						err = unknownParam(p)
					}
					return err
				})
			default:
				err = unknownParam(p)
			}
			return err
		})
		calls = append(calls, c)
		return err
	})
	return calls, err
}

// decodeTools reads the tools array, keeping each tool's bytes.
func decodeTools(n *node, path string) ([]Tool, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	tools := make([]Tool, 0, n.length())
	err := elems(n, path, func(i int, v *node, p string) *Error {
		t, err := typeOf(v, p)
		if err != nil {
			return err
		}
		if t != "function" {
			if t == "" {
				return InvalidRequest(join(p, "type"), fmt.Sprintf("'%s' is required and must be 'function'.", join(p, "type")))
			}
			return Unsupported(join(p, "type"), fmt.Sprintf("Tool type '%s' is not supported; only 'function' tools.", t))
		}
		tool := Tool{Type: t, raw: v.compact()}
		hasFunction := false
		err = fields(v, p, func(key string, v *node, p string) *Error {
			switch key {
			case "type":
				return nil
			case "function":
				hasFunction = true
				var err *Error
				tool.Function, err = decodeFunctionDef(v, p, nil)
				return err
			}
			return unknownParam(p)
		})
		if err == nil && !hasFunction {
			err = InvalidRequest(join(p, "function"), fmt.Sprintf("'%s' is required.", join(p, "function")))
		}
		tools = append(tools, tool)
		return err
	})
	return tools, err
}

// decodeFunctionDef reads a function definition's members; skip names
// members that belong to the enclosing object and are read elsewhere.
func decodeFunctionDef(n *node, path string, skip map[string]bool) (FunctionDef, *Error) {
	var f FunctionDef
	err := fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch {
		case skip[key]:
		case key == "name":
			f.Name, err = str(v, p)
		case key == "description":
			f.Description, err = str(v, p)
		case key == "parameters":
			f.Parameters, err = object(v, p)
		case key == "strict":
			f.Strict, err = optBool(v, p)
		default:
			err = unknownParam(p)
		}
		return err
	})
	return f, err
}

// decodeToolChoice reads tool_choice: a mode string, or a named function in
// the chat form {"type":"function","function":{"name"}} or, flat is true, the
// Responses form {"type":"function","name"}.
func decodeToolChoice(n *node, path string, flat bool) (*ToolChoice, *Error) {
	switch n.kind {
	case kNull:
		return nil, nil
	case kString:
		switch n.str {
		case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
			return &ToolChoice{Mode: n.str}, nil
		}
		return nil, InvalidRequest(path, fmt.Sprintf("'%s' must be 'none', 'auto', 'required' or a function, got '%s'.", path, n.str))
	case kObject:
	default:
		return nil, typeError(path, "a string or an object", n)
	}
	t, err := typeOf(n, path)
	if err != nil {
		return nil, err
	}
	if t != "function" {
		if t == "" {
			return nil, InvalidRequest(join(path, "type"), fmt.Sprintf("'%s' is required.", join(path, "type")))
		}
		return nil, Unsupported(join(path, "type"), fmt.Sprintf("Tool choice type '%s' is not supported; use a mode or a function.", t))
	}
	c := &ToolChoice{Mode: ToolChoiceFunction}
	err = fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch {
		case key == "type":
		case key == "name" && flat:
			c.Name, err = str(v, p)
		case key == "function" && !flat:
			err = fields(v, p, func(key string, v *node, p string) *Error {
				if key != "name" {
					return unknownParam(p)
				}
				var err *Error
				c.Name, err = str(v, p)
				return err
			})
		default:
			err = unknownParam(p)
		}
		return err
	})
	if err == nil && c.Name == "" {
		p := join(path, "function.name")
		if flat {
			p = join(path, "name")
		}
		err = InvalidRequest(p, fmt.Sprintf("'%s' is required.", p))
	}
	return c, err
}

// decodeStop reads a stop string or an array of stop strings.
func decodeStop(n *node, path string) (Stop, *Error) {
	switch n.kind {
	case kNull:
		return nil, nil
	case kString:
		return Stop{n.str}, nil
	case kArray:
		stop := make(Stop, 0, n.length())
		err := elems(n, path, func(i int, v *node, p string) *Error {
			if v.kind != kString {
				return typeError(p, "a string", v)
			}
			stop = append(stop, v.str)
			return nil
		})
		return stop, err
	}
	return nil, typeError(path, "a string or an array of strings", n)
}

// decodeStreamOptions reads stream_options. include_obfuscation is accepted
// and has no effect: nothing is padded.
func decodeStreamOptions(n *node, path string) (*StreamOptions, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	o := &StreamOptions{}
	err := fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "include_usage":
			o.IncludeUsage, err = boolean(v, p)
		case "include_obfuscation":
			_, err = boolean(v, p)
		default:
			err = unknownParam(p)
		}
		return err
	})
	return o, err
}

// decodeResponseFormat reads response_format.
func decodeResponseFormat(n *node, path string) (*ResponseFormat, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	f := &ResponseFormat{}
	err := fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "type":
			f.Type, err = str(v, p)
		case "json_schema":
			if v.kind == kNull {
				return nil
			}
			s := &JSONSchema{}
			f.JSONSchema = s
			err = fields(v, p, func(key string, v *node, p string) *Error {
				var err *Error
				switch key {
				case "name":
					s.Name, err = str(v, p)
				case "description":
					s.Description, err = str(v, p)
				case "schema":
					s.Schema, err = object(v, p)
				case "strict":
					s.Strict, err = optBool(v, p)
				default:
					err = unknownParam(p)
				}
				return err
			})
		default:
			err = unknownParam(p)
		}
		return err
	})
	return f, err
}

// Validate checks the values of a request that decoded, reporting the first
// problem with its path.
func (r *ChatRequest) Validate() *Error {
	if r.Model == "" {
		return InvalidRequest("model", "'model' is required.")
	}
	if len(r.Messages) == 0 {
		return InvalidRequest("messages", "'messages' must contain at least one message.")
	}
	if err := validateMessages(r.Messages, "messages"); err != nil {
		return err
	}
	if err := r.Sampling.Validate(); err != nil {
		return err
	}
	if err := positive(r.MaxTokens, "max_tokens"); err != nil {
		return err
	}
	if err := positive(r.MaxCompletionTokens, "max_completion_tokens"); err != nil {
		return err
	}
	if r.MaxTokens != nil && r.MaxCompletionTokens != nil && *r.MaxTokens != *r.MaxCompletionTokens {
		return InvalidRequest("max_tokens", fmt.Sprintf("'max_tokens' (%d) and 'max_completion_tokens' (%d) disagree; send only 'max_completion_tokens'.", *r.MaxTokens, *r.MaxCompletionTokens))
	}
	if err := validateStop(r.Stop, "stop"); err != nil {
		return err
	}
	if r.StreamOptions != nil && !r.Stream {
		return InvalidRequest("stream_options", "'stream_options' is only allowed when 'stream' is true.")
	}
	if r.TopLogprobs != nil {
		if *r.TopLogprobs < 0 || *r.TopLogprobs > MaxTopLogprobs {
			return InvalidRequest("top_logprobs", fmt.Sprintf("'top_logprobs' must be between 0 and %d, got %d.", MaxTopLogprobs, *r.TopLogprobs))
		}
		if *r.TopLogprobs > 0 && !r.Logprobs {
			return InvalidRequest("top_logprobs", "'top_logprobs' requires 'logprobs' to be true.")
		}
	}
	if err := validateTools(r.Tools, "tools"); err != nil {
		return err
	}
	if err := validateToolChoice(r.ToolChoice, r.Tools, "tool_choice"); err != nil {
		return err
	}
	if err := validateResponseFormat(r.ResponseFormat, "response_format"); err != nil {
		return err
	}
	if err := validateTemplateKwargs(r.ChatTemplateKwargs, "chat_template_kwargs"); err != nil {
		return err
	}
	if r.ReasoningEffort != nil && !reasoningEfforts[*r.ReasoningEffort] {
		return InvalidRequest("reasoning_effort", fmt.Sprintf("'reasoning_effort' must be one of 'none', 'minimal', 'low', 'medium', 'high', got '%s'.", *r.ReasoningEffort))
	}
	if err := validateThinkingBudget(r.MaxThinkingTokens, "thinking_budget"); err != nil {
		return err
	}
	return checkMetadata(r.Metadata, "metadata")
}

// MaxTopLogprobs is the most alternatives a token's logprobs may list.
const MaxTopLogprobs = 20

// MaxStop is the most stop strings a request may give.
const MaxStop = 4

// MaxNewTokens returns the completion token limit: max_completion_tokens, else
// max_tokens; set is false when the client gave neither.
func (r *ChatRequest) MaxNewTokens() (n int, set bool) {
	if r.MaxCompletionTokens != nil {
		return *r.MaxCompletionTokens, true
	}
	if r.MaxTokens != nil {
		return *r.MaxTokens, true
	}
	return 0, false
}

// StopStrings returns the stop strings, nil when none.
func (r *ChatRequest) StopStrings() []string {
	if len(r.Stop) == 0 {
		return nil
	}
	return append([]string(nil), r.Stop...)
}

// EnableThinking returns the thinking switch for the chat template:
// chat_template_kwargs.enable_thinking when given, else false for
// reasoning_effort "none", else nil (the template's default, thinking on).
func (r *ChatRequest) EnableThinking() *bool {
	return enableThinking(r.ChatTemplateKwargs, r.ReasoningEffort)
}

// enableThinking is EnableThinking for any request with template kwargs and
// a reasoning effort.
func enableThinking(kwargs json.RawMessage, effort *string) *bool {
	if kwargs != nil {
		if n, err := parseJSON(kwargs); err == nil && n.kind == kObject {
			if v := n.get("enable_thinking"); v != nil && v.kind == kBool {
				b := v.boolean
				return &b
			}
		}
	}
	if effort != nil && *effort == "none" {
		b := false
		return &b
	}
	return nil
}

// TemplateMessages returns the messages as the chat template receives them;
// see the package function TemplateMessages.
func (r *ChatRequest) TemplateMessages() (json.RawMessage, *Error) {
	return TemplateMessages(r.Messages)
}

// TemplateTools returns the tools as the chat template receives them, or nil.
func (r *ChatRequest) TemplateTools() json.RawMessage {
	return TemplateTools(r.Tools)
}

// positive checks an optional token count is at least 1.
func positive(v *int, name string) *Error {
	if v != nil && *v < 1 {
		return InvalidRequest(name, fmt.Sprintf("'%s' must be at least 1, got %d.", name, *v))
	}
	return nil
}

// validateStop checks the number of stop strings and that none is empty.
func validateStop(stop Stop, path string) *Error {
	if len(stop) > MaxStop {
		return InvalidRequest(path, fmt.Sprintf("'%s' may hold at most %d strings, got %d.", path, MaxStop, len(stop)))
	}
	for i, s := range stop {
		if s == "" {
			return InvalidRequest(at(path, i), "Stop strings must not be empty.")
		}
	}
	return nil
}

// validateMessages checks each message's role and the fields its role allows.
func validateMessages(msgs []Message, path string) *Error {
	for i := range msgs {
		if err := validateMessage(&msgs[i], at(path, i)); err != nil {
			return err
		}
	}
	return nil
}

// validateMessage checks one message.
func validateMessage(m *Message, p string) *Error {
	switch {
	case m.Role == "":
		return InvalidRequest(join(p, "role"), fmt.Sprintf("'%s' is required.", join(p, "role")))
	case m.Role == "function":
		return Unsupported(join(p, "role"), "The legacy 'function' role is not supported; use 'tool' messages.")
	case !messageRoles[m.Role]:
		return InvalidRequest(join(p, "role"), fmt.Sprintf("Invalid role '%s': must be 'system', 'developer', 'user', 'assistant' or 'tool'.", m.Role))
	}
	if m.Role != "assistant" && m.Content.IsNull() {
		return InvalidRequest(join(p, "content"), fmt.Sprintf("'%s' is required for %s messages.", join(p, "content"), m.Role))
	}
	if m.Role == "tool" {
		if m.ToolCallID == "" {
			return InvalidRequest(join(p, "tool_call_id"), fmt.Sprintf("'%s' is required for tool messages.", join(p, "tool_call_id")))
		}
	} else if m.ToolCallID != "" {
		return InvalidRequest(join(p, "tool_call_id"), "Only tool messages have 'tool_call_id'.")
	}
	if m.Role != "assistant" {
		switch {
		case len(m.ToolCalls) > 0:
			return InvalidRequest(join(p, "tool_calls"), "Only assistant messages have 'tool_calls'.")
		case m.ReasoningContent != nil:
			return InvalidRequest(join(p, "reasoning_content"), "Only assistant messages have 'reasoning_content'.")
		case m.Reasoning != nil:
			return InvalidRequest(join(p, "reasoning"), "Only assistant messages have 'reasoning'.")
		}
		return nil
	}
	if m.ReasoningContent != nil && m.Reasoning != nil && *m.ReasoningContent != *m.Reasoning {
		return InvalidRequest(join(p, "reasoning"), "'reasoning' and 'reasoning_content' disagree; send one of them.")
	}
	for j, c := range m.ToolCalls {
		cp := at(join(p, "tool_calls"), j)
		if c.Type != "function" {
			return InvalidRequest(join(cp, "type"), fmt.Sprintf("'%s' must be 'function'.", join(cp, "type")))
		}
		if c.Function.Name == "" {
			return InvalidRequest(join(cp, "function.name"), fmt.Sprintf("'%s' is required.", join(cp, "function.name")))
		}
		if _, err := argumentsObject(c.Function.Arguments, join(cp, "function.arguments")); err != nil {
			return err
		}
	}
	return nil
}

// argumentsObject checks that a tool call's arguments string encodes a JSON
// object (blank means no arguments) and returns that object compact, its key
// order kept.
func argumentsObject(args, path string) (json.RawMessage, *Error) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), nil
	}
	n, err := parseJSON([]byte(args))
	if err != nil && err.Code == CodeNestingTooDeep {
		return nil, NestingTooDeep(path)
	}
	if err != nil {
		return nil, InvalidRequest(path, fmt.Sprintf("'%s' must be a JSON object encoded as a string: %s", path, err.Message))
	}
	if n.kind != kObject {
		return nil, InvalidRequest(path, fmt.Sprintf("'%s' must encode a JSON object, got %s.", path, n.kind))
	}
	return n.compact(), nil
}

// validName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validateTools checks tool types, names (valid and unique) and that
// parameters, when given, are an object schema.
func validateTools(tools []Tool, path string) *Error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		p := at(path, i)
		if t.Type != "function" {
			return InvalidRequest(join(p, "type"), fmt.Sprintf("'%s' must be 'function'.", join(p, "type")))
		}
		np := join(p, "function.name")
		if !validName(t.Function.Name) {
			return InvalidRequest(np, fmt.Sprintf("Invalid function name '%s': it must match ^[a-zA-Z0-9_-]{1,64}$.", t.Function.Name))
		}
		if seen[t.Function.Name] {
			return InvalidRequest(np, fmt.Sprintf("Duplicate function name '%s'.", t.Function.Name))
		}
		seen[t.Function.Name] = true
		if err := validateSchema(t.Function.Parameters, join(p, "function.parameters")); err != nil {
			return err
		}
	}
	return nil
}

// validateSchema checks an optional JSON Schema for function parameters: an
// object whose type, when given, is "object".
func validateSchema(raw json.RawMessage, path string) *Error {
	if raw == nil {
		return nil
	}
	n, err := parseJSON(raw)
	if err != nil {
		return InvalidRequest(path, fmt.Sprintf("'%s' is not valid JSON: %s", path, err.Message))
	}
	if n.kind != kObject {
		return typeError(path, "a JSON Schema object", n)
	}
	if t := n.get("type"); t != nil && !(t.kind == kString && t.str == "object") {
		return InvalidRequest(join(path, "type"), fmt.Sprintf("'%s' must be a JSON Schema of type 'object', got %s.", path, t.raw))
	}
	return nil
}

// validateToolChoice checks that "required" and named choices have tools to
// choose from, and that a named function is one of them.
func validateToolChoice(c *ToolChoice, tools []Tool, path string) *Error {
	if c == nil {
		return nil
	}
	switch c.Mode {
	case ToolChoiceNone, ToolChoiceAuto:
		return nil
	case ToolChoiceRequired:
		if len(tools) == 0 {
			return InvalidRequest(path, "'tool_choice' 'required' needs 'tools'.")
		}
		return nil
	case ToolChoiceFunction:
		for _, t := range tools {
			if t.Function.Name == c.Name {
				return nil
			}
		}
		return InvalidRequest(path, fmt.Sprintf("'tool_choice' names the function '%s', which is not among the tools.", c.Name))
	}
	return InvalidRequest(path, fmt.Sprintf("Invalid tool choice '%s'.", c.Mode))
}

// validateResponseFormat checks the format type and, for json_schema, the
// schema's name and object.
func validateResponseFormat(f *ResponseFormat, path string) *Error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text", "json_object":
		if f.JSONSchema != nil {
			return InvalidRequest(join(path, "json_schema"), fmt.Sprintf("'%s' is only allowed with type 'json_schema'.", join(path, "json_schema")))
		}
		return nil
	case "json_schema":
	case "":
		return InvalidRequest(join(path, "type"), fmt.Sprintf("'%s' is required.", join(path, "type")))
	default:
		return InvalidRequest(join(path, "type"), fmt.Sprintf("Invalid response format type '%s': must be 'text', 'json_object' or 'json_schema'.", f.Type))
	}
	sp := join(path, "json_schema")
	if f.JSONSchema == nil {
		return InvalidRequest(sp, fmt.Sprintf("'%s' is required for type 'json_schema'.", sp))
	}
	if !validName(f.JSONSchema.Name) {
		return InvalidRequest(join(sp, "name"), fmt.Sprintf("Invalid schema name '%s': it must match ^[a-zA-Z0-9_-]{1,64}$.", f.JSONSchema.Name))
	}
	if f.JSONSchema.Schema == nil {
		return InvalidRequest(join(sp, "schema"), fmt.Sprintf("'%s' is required.", join(sp, "schema")))
	}
	return nil
}

// reservedKwargs are template variables the request itself sets.
var reservedKwargs = map[string]bool{"messages": true, "tools": true, "add_generation_prompt": true}

// validateTemplateKwargs checks chat_template_kwargs: an object that does not
// set the variables the request itself provides, with a boolean
// enable_thinking and preserve_thinking.
func validateTemplateKwargs(raw json.RawMessage, path string) *Error {
	if raw == nil {
		return nil
	}
	n, err := parseJSON(raw)
	if err != nil {
		return InvalidRequest(path, fmt.Sprintf("'%s' is not valid JSON: %s", path, err.Message))
	}
	if n.kind != kObject {
		return typeError(path, "an object", n)
	}
	for _, m := range n.members {
		p := join(path, m.key)
		if reservedKwargs[m.key] {
			return InvalidRequest(p, fmt.Sprintf("'%s' cannot be set through chat_template_kwargs.", m.key))
		}
		if (m.key == "enable_thinking" || m.key == "preserve_thinking") && m.val.kind != kBool {
			return typeError(p, "a boolean", m.val)
		}
	}
	return nil
}
