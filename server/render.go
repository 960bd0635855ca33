package server

import "github.com/aimaproject/aimac/openai"

// RenderedChat is a chat-completions request's prompt as the engine would
// be given it.
type RenderedChat struct {
	// Text is the rendered chat template (a required or named tool call
	// is then enforced by constrained decoding, not by the prompt).
	Text string
	IDs  []int32
}

// RenderChat decodes a chat-completions request body and renders its
// prompt through the same path POST /v1/chat/completions takes, without
// generating (`aima-engine probe chat-template`).
func (s *Server) RenderChat(m *Model, body []byte) (*RenderedChat, *openai.Error) {
	req, apiErr := openai.DecodeChatRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	p, apiErr := s.chatPromptOf(m, req)
	if apiErr != nil {
		return nil, apiErr
	}
	return &RenderedChat{Text: p.text, IDs: p.ids}, nil
}

// chatPromptOf renders a chat-completions request's conversation.
func (s *Server) chatPromptOf(m *Model, req *openai.ChatRequest) (*chatPrompt, *openai.Error) {
	messages, apiErr := req.TemplateMessages()
	if apiErr != nil {
		return nil, apiErr
	}
	return s.buildChatPrompt(m, chatInput{messages: messages, tools: req.TemplateTools(), defs: req.Tools,
		choice: req.ToolChoice, kwargs: req.ChatTemplateKwargs, thinking: req.EnableThinking()})
}
