package openai

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ResponsesRequest is a POST /v1/responses body.
type ResponsesRequest struct {
	Model              string               `json:"model"`
	Input              ResponsesInput       `json:"input"`
	Instructions       string               `json:"instructions,omitempty"`
	PreviousResponseID string               `json:"previous_response_id,omitempty"`
	Tools              []ResponsesTool      `json:"tools,omitempty"`
	ToolChoice         *ResponsesToolChoice `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool                `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens    *int                 `json:"max_output_tokens,omitempty"`
	Sampling
	Stream    bool             `json:"stream,omitempty"`
	Store     *bool            `json:"store,omitempty"` // default true
	Reasoning *ReasoningConfig `json:"reasoning,omitempty"`
	// MaxThinkingTokens is thinking_budget, as in chat completions.
	MaxThinkingTokens *int            `json:"thinking_budget,omitempty"`
	Text              *TextConfig     `json:"text,omitempty"` // format "text" only
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	User              string          `json:"user,omitempty"`
}

// ResponsesInput is the input: a string (Text set) or a list of items.
type ResponsesInput struct {
	Text  *string
	Items []ResponsesItem
}

// MarshalJSON writes the string or the items.
func (in ResponsesInput) MarshalJSON() ([]byte, error) {
	if in.Text != nil {
		return marshalNoEscape(*in.Text)
	}
	if in.Items == nil {
		return []byte("null"), nil
	}
	return marshalNoEscape(in.Items)
}

// Responses input item types.
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReasoning          = "reasoning"
)

// ResponsesItem is one input item; Type decides which fields it has:
//
//	message               Role, Content (string or input_text/output_text parts)
//	function_call         CallID, Name, Arguments
//	function_call_output  CallID, Output (string or input_text parts)
//	reasoning             Summary (summary_text parts), Content (reasoning_text parts)
type ResponsesItem struct {
	Type   string
	ID     string
	Status string

	Role    string
	Content Content

	CallID    string
	Name      string
	Arguments string
	Output    Content

	Summary []ContentPart
}

// MarshalJSON writes the item in its type's wire form.
func (it ResponsesItem) MarshalJSON() ([]byte, error) {
	m := orderedObject{}
	m.add("type", it.Type)
	if it.ID != "" {
		m.add("id", it.ID)
	}
	if it.Status != "" {
		m.add("status", it.Status)
	}
	switch it.Type {
	case ItemMessage:
		m.add("role", it.Role)
		m.add("content", it.Content)
	case ItemFunctionCall:
		m.add("call_id", it.CallID)
		m.add("name", it.Name)
		m.add("arguments", it.Arguments)
	case ItemFunctionCallOutput:
		m.add("call_id", it.CallID)
		m.add("output", it.Output)
	case ItemReasoning:
		summary := it.Summary
		if summary == nil {
			summary = []ContentPart{}
		}
		m.add("summary", summary)
		if it.Content.Parts != nil {
			m.add("content", it.Content.Parts)
		}
	}
	return m.marshal()
}

// ResponsesTool is a function tool in the Responses API's flat form.
type ResponsesTool struct {
	Type        string          `json:"type"` // "function"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponsesToolChoice is a ToolChoice written in the Responses form:
// a mode string or {"type":"function","name":…}.
type ResponsesToolChoice ToolChoice

// MarshalJSON writes the Responses form.
func (c ResponsesToolChoice) MarshalJSON() ([]byte, error) {
	if c.Mode == ToolChoiceFunction {
		o := orderedObject{}
		o.add("type", "function")
		o.add("name", c.Name)
		return o.marshal()
	}
	if c.Mode == "" {
		return json.Marshal(ToolChoiceAuto)
	}
	return json.Marshal(c.Mode)
}

// ReasoningConfig is the reasoning option. Summaries are accepted but not
// generated: the reasoning text itself is returned as reasoning_text content.
type ReasoningConfig struct {
	Effort  string `json:"effort,omitempty"`  // none, minimal, low, medium, high
	Summary string `json:"summary,omitempty"` // auto, concise, detailed
}

// TextConfig is the text output option.
type TextConfig struct {
	Format *TextFormat `json:"format,omitempty"`
}

// TextFormat is the text output format: text, json_object, or json_schema
// with its name and schema (the Responses API's flat form of chat's
// response_format).
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponseFormat is the format as chat's response_format, so both
// endpoints are constrained by one path.
func (f *TextFormat) ResponseFormat() *ResponseFormat {
	if f == nil {
		return nil
	}
	rf := &ResponseFormat{Type: f.Type}
	if f.Type == "json_schema" {
		rf.JSONSchema = &JSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
	}
	return rf
}

// responsesUnsupported lists Responses fields this server does not
// implement, with the values that ask for nothing.
var responsesUnsupported = map[string]unsupportedCheck{
	"background":             falseOnly("background responses are not supported"),
	"conversation":           nullOnly("conversations are not supported; use previous_response_id"),
	"include":                emptyOnly("no additional output data can be included"),
	"max_tool_calls":         nullOnly("limiting tool calls is not supported"),
	"prompt":                 nullOnly("prompt templates are not supported"),
	"prompt_cache_key":       nullOnly("prompt cache routing is not supported; the prefix cache is automatic"),
	"prompt_cache_retention": nullOnly("prompt cache retention is not configurable"),
	"prompt_cache_options":   nullOnly("prompt cache options are not configurable"),
	"safety_identifier":      nullOnly("safety identifiers are not supported"),
	"service_tier":           serviceTier,
	"top_logprobs":           zeroOnly("log probabilities are not available on /v1/responses"),
	"truncation":             oneOfStrings("the context is never truncated", "disabled"),
	"context_management":     nullOnly("context management is not supported"),
	"moderation":             nullOnly("moderation is not supported"),
	"image":                  nullOnly("image generation is not supported"),
	"access_programs":        nullOnly("access programs are not supported"),
}

// zeroOnly accepts null or 0.
func zeroOnly(what string) unsupportedCheck {
	return func(n *node, path string) *Error {
		if n.kind == kNull || n.kind == kNumber && n.num == 0 {
			return nil
		}
		return Unsupported(path, fmt.Sprintf("'%s' is not supported: %s.", path, what))
	}
}

// responsesParts are the content parts of Responses message items.
var responsesParts = partKinds{
	text:  map[string]bool{"input_text": true, "output_text": true},
	extra: map[string]bool{"annotations": true, "logprobs": true},
	media: map[string]string{
		"input_image": "images are not supported: this server runs a text-only model",
		"input_file":  "file inputs are not supported",
		"input_audio": "audio input is not supported: this server runs a text-only model",
		"refusal":     "refusal parts are not supported",
	},
}

// outputParts are the parts of a function call output.
var outputParts = partKinds{
	text: map[string]bool{"input_text": true},
	media: map[string]string{
		"input_image": "images are not supported: this server runs a text-only model",
		"input_file":  "file inputs are not supported",
	},
}

// Part kinds of reasoning items.
var (
	summaryParts   = partKinds{text: map[string]bool{"summary_text": true}}
	reasoningParts = partKinds{text: map[string]bool{"reasoning_text": true}}
)

// DecodeResponsesRequest strictly decodes and validates a Responses body.
func DecodeResponsesRequest(body []byte) (*ResponsesRequest, *Error) {
	root, err := parseRoot(body)
	if err != nil {
		return nil, err
	}
	r := &ResponsesRequest{}
	err = fields(root, "", func(key string, v *node, p string) *Error {
		if known, err := r.Sampling.decodeField(key, v, p); known {
			return err
		}
		var err *Error
		switch key {
		case "model":
			r.Model, err = str(v, p)
		case "input":
			r.Input, err = decodeInput(v, p)
		case "instructions":
			r.Instructions, err = str(v, p)
		case "previous_response_id":
			r.PreviousResponseID, err = str(v, p)
		case "tools":
			r.Tools, err = decodeResponsesTools(v, p)
		case "tool_choice":
			var c *ToolChoice
			c, err = decodeToolChoice(v, p, true)
			if c != nil {
				r.ToolChoice = (*ResponsesToolChoice)(c)
			}
		case "parallel_tool_calls":
			r.ParallelToolCalls, err = optBool(v, p)
		case "max_output_tokens":
			r.MaxOutputTokens, err = optInt(v, p)
		case "stream":
			r.Stream, err = boolean(v, p)
		case "stream_options":
			if v.kind != kNull {
				err = fields(v, p, func(key string, v *node, p string) *Error {
					if key != "include_obfuscation" {
						return unknownParam(p)
					}
					_, err := boolean(v, p)
					return err
				})
			}
		case "store":
			r.Store, err = optBool(v, p)
		case "reasoning":
			r.Reasoning, err = decodeReasoningConfig(v, p)
		case "thinking_budget":
			r.MaxThinkingTokens, err = optInt(v, p)
		case "text":
			r.Text, err = decodeTextConfig(v, p)
		case "metadata":
			r.Metadata, err = object(v, p)
		case "user":
			r.User, err = str(v, p)
		default:
			if check, ok := responsesUnsupported[key]; ok {
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

// decodeInput reads the input string or item list.
func decodeInput(n *node, path string) (ResponsesInput, *Error) {
	switch n.kind {
	case kNull:
		return ResponsesInput{}, nil
	case kString:
		s := n.str
		return ResponsesInput{Text: &s}, nil
	case kArray:
	default:
		return ResponsesInput{}, typeError(path, "a string or an array of items", n)
	}
	items := make([]ResponsesItem, 0, n.length())
	err := elems(n, path, func(i int, v *node, p string) *Error {
		it, err := decodeItem(v, p)
		items = append(items, it)
		return err
	})
	return ResponsesInput{Items: items}, err
}

// decodeItem reads one input item by its type; an item without a type but
// with a role is a message.
func decodeItem(n *node, path string) (ResponsesItem, *Error) {
	t, err := typeOf(n, path)
	if err != nil {
		return ResponsesItem{}, err
	}
	if t == "" && n.get("role") != nil {
		t = ItemMessage
	}
	switch t {
	case ItemMessage, ItemFunctionCall, ItemFunctionCallOutput, ItemReasoning:
	case "":
		return ResponsesItem{}, InvalidRequest(join(path, "type"), fmt.Sprintf("'%s' is required.", join(path, "type")))
	default:
		return ResponsesItem{}, Unsupported(join(path, "type"), fmt.Sprintf("Input item type '%s' is not supported.", t))
	}
	it := ResponsesItem{Type: t}
	err = fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch {
		case key == "type":
		case key == "id":
			it.ID, err = str(v, p)
		case key == "status":
			it.Status, err = str(v, p)
		case key == "role" && t == ItemMessage:
			it.Role, err = str(v, p)
		case key == "content" && t == ItemMessage:
			it.Content, err = decodeContent(v, p, responsesParts)
		case key == "content" && t == ItemReasoning:
			it.Content, err = decodeContent(v, p, reasoningParts)
			if err == nil && it.Content.Text != nil {
				err = typeError(p, "an array of reasoning_text parts", v)
			}
		case key == "summary" && t == ItemReasoning:
			var c Content
			c, err = decodeContent(v, p, summaryParts)
			if err == nil && c.Text != nil {
				err = typeError(p, "an array of summary_text parts", v)
			}
			it.Summary = c.Parts
		case key == "encrypted_content" && t == ItemReasoning:
			err = nullOnly("encrypted reasoning cannot be decrypted by this server")(v, p)
		case (key == "call_id") && (t == ItemFunctionCall || t == ItemFunctionCallOutput):
			it.CallID, err = str(v, p)
		case key == "name" && t == ItemFunctionCall:
			it.Name, err = str(v, p)
		case key == "arguments" && t == ItemFunctionCall:
			it.Arguments, err = str(v, p)
		case key == "output" && t == ItemFunctionCallOutput:
			it.Output, err = decodeContent(v, p, outputParts)
		default:
			err = unknownParam(p)
		}
		return err
	})
	return it, err
}

// decodeResponsesTools reads flat function tools.
func decodeResponsesTools(n *node, path string) ([]ResponsesTool, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	tools := make([]ResponsesTool, 0, n.length())
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
		f, err := decodeFunctionDef(v, p, map[string]bool{"type": true})
		tools = append(tools, ResponsesTool{Type: t, Name: f.Name, Description: f.Description, Parameters: f.Parameters, Strict: f.Strict})
		return err
	})
	return tools, err
}

// decodeReasoningConfig reads the reasoning option.
func decodeReasoningConfig(n *node, path string) (*ReasoningConfig, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	c := &ReasoningConfig{}
	err := fields(n, path, func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "effort":
			c.Effort, err = str(v, p)
		case "summary":
			c.Summary, err = str(v, p)
		case "generate_summary":
			c.Summary, err = str(v, p)
		default:
			err = unknownParam(p)
		}
		return err
	})
	return c, err
}

// decodeTextConfig reads the text option.
func decodeTextConfig(n *node, path string) (*TextConfig, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	c := &TextConfig{}
	err := fields(n, path, func(key string, v *node, p string) *Error {
		switch key {
		case "format":
			if v.kind == kNull {
				return nil
			}
			t, err := typeOf(v, p)
			if err != nil {
				return err
			}
			switch t {
			case "text", "json_object", "json_schema":
			case "":
				return InvalidRequest(join(p, "type"), fmt.Sprintf("'%s' is required.", join(p, "type")))
			default:
				return InvalidRequest(join(p, "type"), fmt.Sprintf("Invalid text format '%s'.", t))
			}
			f := &TextFormat{Type: t}
			c.Format = f
			return fields(v, p, func(key string, v *node, p string) *Error {
				var err *Error
				switch {
				case key == "type":
				case key == "name" && t == "json_schema":
					f.Name, err = str(v, p)
				case key == "description" && t == "json_schema":
					f.Description, err = str(v, p)
				case key == "schema" && t == "json_schema":
					f.Schema, err = object(v, p)
				case key == "strict" && t == "json_schema":
					f.Strict, err = optBool(v, p)
				default:
					err = unknownParam(p)
				}
				return err
			})
		case "verbosity":
			return nullOnly("verbosity control is not supported")(v, p)
		}
		return unknownParam(p)
	})
	return c, err
}

// Validate checks the values of a request that decoded, reporting the first
// problem with its path.
func (r *ResponsesRequest) Validate() *Error {
	if r.Model == "" {
		return InvalidRequest("model", "'model' is required.")
	}
	if r.Input.Text == nil && len(r.Input.Items) == 0 {
		return InvalidRequest("input", "'input' is required and must not be empty.")
	}
	for i := range r.Input.Items {
		if err := validateItem(&r.Input.Items[i], at("input", i)); err != nil {
			return err
		}
	}
	if err := validateResponsesTools(r.Tools, "tools"); err != nil {
		return err
	}
	if err := validateToolChoice(r.ChatToolChoice(), r.chatTools(), "tool_choice"); err != nil {
		return err
	}
	if err := positive(r.MaxOutputTokens, "max_output_tokens"); err != nil {
		return err
	}
	if err := r.Sampling.Validate(); err != nil {
		return err
	}
	if r.Reasoning != nil {
		if e := r.Reasoning.Effort; e != "" && !reasoningEfforts[e] {
			return InvalidRequest("reasoning.effort", fmt.Sprintf("'reasoning.effort' must be one of 'none', 'minimal', 'low', 'medium', 'high', got '%s'.", e))
		}
		switch r.Reasoning.Summary {
		case "", "auto", "concise", "detailed":
		default:
			return InvalidRequest("reasoning.summary", fmt.Sprintf("'reasoning.summary' must be 'auto', 'concise' or 'detailed', got '%s'.", r.Reasoning.Summary))
		}
	}
	if err := validateThinkingBudget(r.MaxThinkingTokens, "thinking_budget"); err != nil {
		return err
	}
	if r.Text != nil && r.Text.Format != nil && r.Text.Format.Type == "json_schema" {
		f := r.Text.Format
		if !validName(f.Name) {
			return InvalidRequest("text.format.name", fmt.Sprintf("Invalid schema name '%s': it must match ^[a-zA-Z0-9_-]{1,64}$.", f.Name))
		}
		if f.Schema == nil {
			return InvalidRequest("text.format.schema", "'text.format.schema' is required.")
		}
	}
	return checkMetadata(r.Metadata, "metadata")
}

// itemStatuses are the statuses an input item may carry.
var itemStatuses = map[string]bool{"": true, "in_progress": true, "completed": true, "incomplete": true}

// validateItem checks one input item's required fields.
func validateItem(it *ResponsesItem, p string) *Error {
	required := func(v, key string) *Error {
		if v == "" {
			return InvalidRequest(join(p, key), fmt.Sprintf("'%s' is required.", join(p, key)))
		}
		return nil
	}
	if !itemStatuses[it.Status] {
		return InvalidRequest(join(p, "status"), fmt.Sprintf("Invalid status '%s'.", it.Status))
	}
	switch it.Type {
	case ItemMessage:
		switch it.Role {
		case "user", "assistant", "system", "developer":
		case "":
			return required("", "role")
		default:
			return InvalidRequest(join(p, "role"), fmt.Sprintf("Invalid role '%s': must be 'user', 'assistant', 'system' or 'developer'.", it.Role))
		}
		if it.Content.IsNull() {
			return required("", "content")
		}
	case ItemFunctionCall:
		if err := required(it.CallID, "call_id"); err != nil {
			return err
		}
		if err := required(it.Name, "name"); err != nil {
			return err
		}
		if _, err := argumentsObject(it.Arguments, join(p, "arguments")); err != nil {
			return err
		}
	case ItemFunctionCallOutput:
		if err := required(it.CallID, "call_id"); err != nil {
			return err
		}
		if it.Output.IsNull() {
			return required("", "output")
		}
	case ItemReasoning:
		if it.Content.Text != nil {
			return InvalidRequest(join(p, "content"), "Reasoning content must be a list of reasoning_text parts.")
		}
	default:
		return Unsupported(join(p, "type"), fmt.Sprintf("Input item type '%s' is not supported.", it.Type))
	}
	return nil
}

// validateResponsesTools checks tool types, names and parameter schemas.
func validateResponsesTools(tools []ResponsesTool, path string) *Error {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		p := at(path, i)
		if t.Type != "function" {
			return InvalidRequest(join(p, "type"), fmt.Sprintf("'%s' must be 'function'.", join(p, "type")))
		}
		if !validName(t.Name) {
			return InvalidRequest(join(p, "name"), fmt.Sprintf("Invalid function name '%s': it must match ^[a-zA-Z0-9_-]{1,64}$.", t.Name))
		}
		if seen[t.Name] {
			return InvalidRequest(join(p, "name"), fmt.Sprintf("Duplicate function name '%s'.", t.Name))
		}
		seen[t.Name] = true
		if err := validateSchema(t.Parameters, join(p, "parameters")); err != nil {
			return err
		}
	}
	return nil
}

// chatTools converts the flat tools to chat tools.
func (r *ResponsesRequest) chatTools() []Tool {
	if len(r.Tools) == 0 {
		return nil
	}
	tools := make([]Tool, len(r.Tools))
	for i, t := range r.Tools {
		tools[i] = Tool{Type: "function", Function: FunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}}
	}
	return tools
}

// ChatToolChoice returns tool_choice in its chat form, nil when absent.
func (r *ResponsesRequest) ChatToolChoice() *ToolChoice {
	if r.ToolChoice == nil {
		return nil
	}
	c := ToolChoice(*r.ToolChoice)
	return &c
}

// MaxNewTokens returns max_output_tokens; set is false when absent.
func (r *ResponsesRequest) MaxNewTokens() (n int, set bool) {
	if r.MaxOutputTokens != nil {
		return *r.MaxOutputTokens, true
	}
	return 0, false
}

// EnableThinking returns false when reasoning.effort is "none", else nil (the
// template's default, thinking on).
func (r *ResponsesRequest) EnableThinking() *bool {
	if r.Reasoning == nil || r.Reasoning.Effort == "" {
		return nil
	}
	e := r.Reasoning.Effort
	return enableThinking(nil, &e)
}

// ToChat converts the request into chat messages and tools for the template:
// the instructions as the system message, then history (the stored
// conversation of previous_response_id, as Conversation returned it plus the
// response's output), then the input. A system or developer message at the
// start of the conversation is joined to the instructions with a blank line.
func (r *ResponsesRequest) ToChat(history []Message) ([]Message, []Tool, *Error) {
	conv, err := r.Conversation(history)
	if err != nil {
		return nil, nil, err
	}
	if r.Instructions == "" {
		return conv, r.chatTools(), nil
	}
	msgs := make([]Message, 0, len(conv)+1)
	sys := r.Instructions
	if len(conv) > 0 && isSystem(conv[0].Role) {
		sys += "\n\n" + conv[0].Content.String()
		conv = conv[1:]
	}
	msgs = append(msgs, Message{Role: "system", Content: TextContent(sys)})
	msgs = append(msgs, conv...)
	return msgs, r.chatTools(), nil
}

// isSystem reports the roles the template renders as the system turn.
func isSystem(role string) bool { return role == "system" || role == "developer" }

// Conversation returns history followed by the input as chat messages,
// without the instructions (which OpenAI does not carry over to a follow-up
// response): what the server stores, with the output, under the new
// response's id. Reasoning, assistant messages and function calls that follow
// one another become one assistant message; function_call_output items
// become tool messages and must answer a call made earlier.
func (r *ResponsesRequest) Conversation(history []Message) ([]Message, *Error) {
	c := converter{msgs: append([]Message(nil), history...)}
	if r.Input.Text != nil {
		c.add(Message{Role: "user", Content: TextContent(*r.Input.Text)})
		return c.msgs, nil
	}
	for i, it := range r.Input.Items {
		if err := c.item(it, at("input", i)); err != nil {
			return nil, err
		}
	}
	c.flush()
	return c.msgs, nil
}

// converter turns Responses items into chat messages, gathering consecutive
// assistant output into one message.
type converter struct {
	msgs []Message
	asst *Message // the assistant message being gathered, not yet in msgs
}

// add appends a message after the gathered assistant message.
func (c *converter) add(m Message) {
	c.flush()
	c.msgs = append(c.msgs, m)
}

// flush appends the gathered assistant message.
func (c *converter) flush() {
	if c.asst != nil {
		c.msgs = append(c.msgs, *c.asst)
		c.asst = nil
	}
}

// assistant returns the gathered assistant message, starting a new one when
// the current one already has what is about to be added.
func (c *converter) assistant(newTurn bool) *Message {
	if c.asst != nil && newTurn {
		c.flush()
	}
	if c.asst == nil {
		c.asst = &Message{Role: "assistant"}
	}
	return c.asst
}

// item converts one input item.
func (c *converter) item(it ResponsesItem, p string) *Error {
	switch it.Type {
	case ItemMessage:
		if isSystem(it.Role) {
			c.flush()
			if len(c.msgs) > 0 {
				if len(c.msgs) == 1 && isSystem(c.msgs[0].Role) {
					c.msgs[0].Content = TextContent(c.msgs[0].Content.String() + "\n\n" + it.Content.String())
					return nil
				}
				return InvalidRequest(join(p, "role"), fmt.Sprintf("A %s message must come before the rest of the conversation; the chat template accepts only one, at the start.", it.Role))
			}
			c.add(Message{Role: "system", Content: chatContent(it.Content)})
			return nil
		}
		if it.Role == "assistant" {
			a := c.assistant(c.asst != nil && (!c.asst.Content.IsNull() || len(c.asst.ToolCalls) > 0))
			a.Content = TextContent(it.Content.String())
			return nil
		}
		c.add(Message{Role: it.Role, Content: chatContent(it.Content)})
	case ItemReasoning:
		a := c.assistant(c.asst != nil && (c.asst.ReasoningContent != nil || !c.asst.Content.IsNull() || len(c.asst.ToolCalls) > 0))
		text := it.Content.String()
		if it.Content.Parts == nil {
			var parts []string
			for _, s := range it.Summary {
				parts = append(parts, s.Text)
			}
			text = strings.Join(parts, "\n\n")
		}
		a.ReasoningContent = &text
	case ItemFunctionCall:
		a := c.assistant(false)
		a.ToolCalls = append(a.ToolCalls, ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: it.Name, Arguments: it.Arguments}})
	case ItemFunctionCallOutput:
		c.flush()
		if !c.called(it.CallID) {
			return InvalidRequest(join(p, "call_id"), fmt.Sprintf("No function call with call_id '%s' precedes this output.", it.CallID))
		}
		c.add(Message{Role: "tool", ToolCallID: it.CallID, Content: chatContent(it.Output)})
	}
	return nil
}

// called reports whether an assistant message so far made the call id.
func (c *converter) called(id string) bool {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		for _, tc := range c.msgs[i].ToolCalls {
			if tc.ID == id {
				return true
			}
		}
	}
	return false
}

// chatContent converts Responses content to chat content: a string stays, and
// text parts become chat text parts.
func chatContent(in Content) Content {
	if in.Parts == nil {
		return in
	}
	parts := make([]ContentPart, len(in.Parts))
	for i, p := range in.Parts {
		parts[i] = ContentPart{Type: "text", Text: p.Text}
	}
	return Content{Parts: parts}
}
