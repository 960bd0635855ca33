package server

import (
	"net/http"

	"github.com/aimaproject/aimac/openai"
)

// tokenize serves POST /tokenize: a prompt, or messages (and tools)
// rendered with the chat template, to token ids.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody(s, w, r, openai.DecodeTokenizeRequest)
	if !ok {
		return
	}
	m, apiErr := s.servingOptional(req.Model)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	var ids []int32
	if req.Prompt != nil {
		ids = m.Tokenizer.Encode(*req.Prompt)
	} else {
		conv := &openai.ChatRequest{Messages: req.Messages, Tools: req.Tools}
		msgs, apiErr := conv.TemplateMessages()
		if apiErr != nil {
			writeError(w, apiErr)
			return
		}
		in := chatInput{messages: msgs, tools: conv.TemplateTools(), defs: req.Tools, kwargs: req.ChatTemplateKwargs}
		p, apiErr := s.buildChatPromptOpts(m, in, req.AddGenerationPrompt == nil || *req.AddGenerationPrompt)
		if apiErr != nil {
			writeError(w, apiErr)
			return
		}
		ids = p.ids
	}
	if ids == nil {
		ids = []int32{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": ids, "count": len(ids), "max_model_len": m.Engine.Capacity()})
}

// detokenize serves POST /detokenize: token ids to text.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody(s, w, r, openai.DecodeDetokenizeRequest)
	if !ok {
		return
	}
	m, apiErr := s.servingOptional(req.Model)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	text, err := m.Tokenizer.Decode(req.Tokens, false)
	if err != nil {
		writeError(w, openai.InvalidRequest("tokens", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text})
}
