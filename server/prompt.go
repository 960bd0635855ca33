package server

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
)

// chatPrompt is a rendered, tokenized conversation and how to read the
// model's answer to it.
type chatPrompt struct {
	text  string
	ids   []int32
	parse output.Options
	// constraint forces a required or named tool call (nil: none).
	constraint Constraint
}

// chatInput is a conversation in template form.
type chatInput struct {
	messages json.RawMessage
	tools    json.RawMessage // as the template sees them; nil when not offered
	defs     []openai.Tool
	choice   *openai.ToolChoice
	kwargs   json.RawMessage
	thinking *bool
}

// buildChatPrompt renders the checkpoint's own template and tokenizes the
// result. A required or named tool choice is enforced by constrained
// decoding: a grammar of the tool-call block, the declared names and each
// tool's parameters (toolConstraint); thinking is off for it unless the
// request turns it on, and the call follows the reasoning then.
func (s *Server) buildChatPrompt(m *Model, in chatInput) (*chatPrompt, *openai.Error) {
	return s.buildChatPromptOpts(m, in, true)
}

// buildChatPromptOpts is buildChatPrompt with the generation prompt optional
// (/tokenize can count a conversation without it).
func (s *Server) buildChatPromptOpts(m *Model, in chatInput, addGenerationPrompt bool) (*chatPrompt, *openai.Error) {
	mode := "auto"
	if in.choice != nil {
		mode = in.choice.Mode
	}
	if len(in.defs) == 0 || mode == "none" {
		in.tools = nil
	}
	thinking := in.thinking
	mustCall := in.tools != nil && (mode == openai.ToolChoiceRequired || mode == openai.ToolChoiceFunction)
	if mustCall && thinking == nil {
		off := false
		thinking = &off
	} else if thinking == nil && s.cfg.DisableThinking {
		off := false
		thinking = &off
	}
	kwargs, err := mergeKwargs(in.kwargs, thinking)
	if err != nil {
		return nil, openai.InvalidRequest("chat_template_kwargs", err.Error())
	}
	text, err := m.Template.Render(chat.Input{Messages: in.messages, Tools: in.tools, AddGenerationPrompt: addGenerationPrompt, Kwargs: kwargs})
	if err != nil {
		var re *chat.RenderError
		if errors.As(err, &re) {
			return nil, openai.InvalidRequest("messages", "the chat template refused the conversation: "+re.Message)
		}
		return nil, openai.Internal("rendering the chat template: " + err.Error())
	}
	p := &chatPrompt{text: text}
	p.ids = m.Tokenizer.Encode(p.text)
	// The template leaves the answer inside <think> when thinking is on.
	p.parse.StartInReasoning = strings.HasSuffix(text, "<think>\n")
	if in.tools != nil {
		for _, d := range in.defs {
			p.parse.Tools = append(p.parse.Tools, output.ToolSchema{Name: d.Function.Name, Parameters: d.Function.Parameters})
		}
	}
	p.parse.NewCallID = func() string { return newID("call_") }
	if mustCall && addGenerationPrompt {
		var apiErr *openai.Error
		if p.constraint, apiErr = toolConstraint(m, in.defs, in.choice); apiErr != nil {
			return nil, apiErr
		}
	}
	return p, nil
}

// mergeKwargs adds enable_thinking to the client's template variables
// unless the client set it.
func mergeKwargs(raw json.RawMessage, thinking *bool) (json.RawMessage, error) {
	vars := map[string]json.RawMessage{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &vars); err != nil {
			return nil, errors.New("must be a JSON object")
		}
	}
	if _, set := vars["enable_thinking"]; !set && thinking != nil {
		vars["enable_thinking"], _ = json.Marshal(*thinking)
	}
	if len(vars) == 0 {
		return nil, nil
	}
	return json.Marshal(vars)
}

// budget is the number of tokens a request may generate: what it asked for
// (or all the room left), refused when prompt plus output exceed the context.
func budget(m *Model, promptLen int, asked int, set bool) (int, *openai.Error) {
	capacity := m.Engine.Capacity()
	if !set {
		asked = capacity - promptLen
	}
	if promptLen+asked > capacity || asked < 1 {
		return 0, openai.ContextLengthExceeded(
			"this model's context is " + itoa(capacity) + " tokens; the prompt has " + itoa(promptLen) +
				" and max_tokens asks for " + itoa(asked))
	}
	return asked, nil
}
