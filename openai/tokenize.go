package openai

import "encoding/json"

// TokenizeRequest is a POST /tokenize body: a prompt, or messages (with
// optional tools) rendered by the chat template.
type TokenizeRequest struct {
	Model               string          `json:"model,omitempty"` // optional; checked by the server when given
	Prompt              *string         `json:"prompt,omitempty"`
	Messages            []Message       `json:"messages,omitempty"`
	Tools               []Tool          `json:"tools,omitempty"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt,omitempty"` // messages only; default true
	AddSpecialTokens    *bool           `json:"add_special_tokens,omitempty"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs,omitempty"` // messages only
}

// DetokenizeRequest is a POST /detokenize body.
type DetokenizeRequest struct {
	Model  string  `json:"model,omitempty"` // optional; checked by the server when given
	Tokens []int32 `json:"tokens"`
}

// DecodeTokenizeRequest strictly decodes and validates a tokenize body.
func DecodeTokenizeRequest(body []byte) (*TokenizeRequest, *Error) {
	root, err := parseRoot(body)
	if err != nil {
		return nil, err
	}
	r := &TokenizeRequest{}
	err = fields(root, "", func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "model":
			r.Model, err = str(v, p)
		case "prompt":
			r.Prompt, err = optStr(v, p)
		case "messages":
			r.Messages, err = decodeMessages(v, p)
		case "tools":
			r.Tools, err = decodeTools(v, p)
		case "add_generation_prompt":
			r.AddGenerationPrompt, err = optBool(v, p)
		case "add_special_tokens":
			r.AddSpecialTokens, err = optBool(v, p)
		case "chat_template_kwargs":
			r.ChatTemplateKwargs, err = object(v, p)
		default:
			err = unknownParam(p)
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

// Validate checks that exactly one of prompt and messages is given and that
// the chat-only fields come with messages.
func (r *TokenizeRequest) Validate() *Error {
	if r.Prompt != nil {
		switch {
		case r.Messages != nil:
			return InvalidRequest("messages", "Send either 'prompt' or 'messages', not both.")
		case r.Tools != nil:
			return InvalidRequest("tools", "'tools' is only allowed with 'messages'.")
		case r.AddGenerationPrompt != nil:
			return InvalidRequest("add_generation_prompt", "'add_generation_prompt' is only allowed with 'messages'.")
		case r.ChatTemplateKwargs != nil:
			return InvalidRequest("chat_template_kwargs", "'chat_template_kwargs' is only allowed with 'messages'.")
		}
		return nil
	}
	if len(r.Messages) == 0 {
		return InvalidRequest("messages", "Send 'prompt' or a non-empty 'messages'.")
	}
	if err := validateMessages(r.Messages, "messages"); err != nil {
		return err
	}
	if err := validateTools(r.Tools, "tools"); err != nil {
		return err
	}
	return validateTemplateKwargs(r.ChatTemplateKwargs, "chat_template_kwargs")
}

// TemplateMessages returns the messages as the chat template receives them.
func (r *TokenizeRequest) TemplateMessages() (json.RawMessage, *Error) {
	return TemplateMessages(r.Messages)
}

// TemplateTools returns the tools as the chat template receives them, or nil.
func (r *TokenizeRequest) TemplateTools() json.RawMessage { return TemplateTools(r.Tools) }

// EnableThinking returns chat_template_kwargs.enable_thinking, or nil.
func (r *TokenizeRequest) EnableThinking() *bool { return enableThinking(r.ChatTemplateKwargs, nil) }

// WithGenerationPrompt reports whether the rendering ends with the assistant
// turn's opening (add_generation_prompt, default true).
func (r *TokenizeRequest) WithGenerationPrompt() bool {
	return r.AddGenerationPrompt == nil || *r.AddGenerationPrompt
}

// DecodeDetokenizeRequest strictly decodes and validates a detokenize body.
func DecodeDetokenizeRequest(body []byte) (*DetokenizeRequest, *Error) {
	root, err := parseRoot(body)
	if err != nil {
		return nil, err
	}
	r := &DetokenizeRequest{}
	err = fields(root, "", func(key string, v *node, p string) *Error {
		var err *Error
		switch key {
		case "model":
			r.Model, err = str(v, p)
		case "tokens":
			r.Tokens, err = tokenIDs(v, p)
		default:
			err = unknownParam(p)
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

// Validate checks that tokens are given and are valid ids.
func (r *DetokenizeRequest) Validate() *Error {
	if r.Tokens == nil {
		return InvalidRequest("tokens", "'tokens' is required.")
	}
	for i, id := range r.Tokens {
		if id < 0 {
			return InvalidRequest(at("tokens", i), "Invalid token id.")
		}
	}
	return nil
}
