package server

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/server/sse"
)

// createResponse serves POST /v1/responses, continuing a stored
// conversation when previous_response_id names one.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody(s, w, r, openai.DecodeResponsesRequest)
	if !ok {
		return
	}
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	var history []openai.Message
	if id := req.PreviousResponseID; id != "" {
		st, ok := s.responses.get(id)
		if !ok {
			writeError(w, openai.InvalidRequest("previous_response_id", "no stored response "+id+" (it may have been evicted or was not stored)"))
			return
		}
		history = st.conversation
	}
	msgs, tools, apiErr := req.ToChat(history)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	conv := &openai.ChatRequest{Messages: msgs, Tools: tools}
	messages, apiErr := conv.TemplateMessages()
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	var choice *openai.ToolChoice
	if req.ToolChoice != nil {
		c := openai.ToolChoice(*req.ToolChoice)
		choice = &c
	}
	prompt, apiErr := s.buildChatPrompt(m, chatInput{messages: messages, tools: conv.TemplateTools(), defs: tools,
		choice: choice, thinking: req.EnableThinking()})
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	asked, set := 0, req.MaxOutputTokens != nil
	if set {
		asked = *req.MaxOutputTokens
	}
	maxNew, apiErr := budget(m, len(prompt.ids), asked, set)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	p := genParams{prompt: prompt.ids, maxNew: maxNew, parse: prompt.parse, forced: prompt.forced, boundary: turnBoundary(m, prompt.ids),
		oneCall: prompt.parse.Tools != nil && req.ParallelToolCalls != nil && !*req.ParallelToolCalls,
		sampler: samplerConfig(m, samplingRequest{temperature: req.Temperature, topP: req.TopP})}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	done, apiErr := s.admit(ctx)
	if apiErr != nil {
		respond(w, nil, apiErr)
		return
	}
	defer done()

	b := openai.NewResponseBuilder(openai.NewResponse(newID("resp_"), m.ID, time.Now().Unix(), req))
	var stream *sse.Writer
	send := func(evs []openai.ResponseEvent) error {
		if stream == nil {
			return nil
		}
		for _, e := range evs {
			if err := stream.Event(e.Type, e); err != nil {
				cancel()
				return err
			}
		}
		return nil
	}
	if req.Stream {
		var err error
		if stream, err = sse.New(w); err != nil {
			return
		}
		if send(b.Start()) != nil {
			leftEarly(w)
			return
		}
	}
	res, err := s.generate(ctx, m, p, func(st genStep) error {
		for _, e := range st.events {
			var evs []openai.ResponseEvent
			switch e.Kind {
			case output.Reasoning:
				evs = b.Reasoning(e.Text)
			case output.Content:
				evs = b.Text(e.Text)
			case output.ToolCallStart:
				evs = b.FunctionCall(e.ID, e.Name)
			case output.ToolCallArguments:
				evs = b.Arguments(e.Text)
			}
			if err := send(evs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		apiErr := failure(ctx, err)
		if apiErr != clientGone && stream != nil {
			send(b.Fail(apiErr))
		} else {
			respond(w, nil, apiErr)
		}
		return
	}
	incomplete := ""
	if res.finish == "length" {
		incomplete = "max_output_tokens"
	}
	reasoning := 0
	if res.result.Reasoning != "" {
		reasoning = len(m.Tokenizer.Encode(res.result.Reasoning))
	}
	evs := b.Finish(openai.NewResponseUsage(res.promptTokens, res.completionTokens, res.cachedTokens, min(reasoning, res.completionTokens)), incomplete)
	resp := b.Response()
	if resp.Store {
		history, _ := req.Conversation(history)
		s.responses.put(resp.ID, stored{response: resp, conversation: append(history, openai.OutputMessages(resp.Output)...)})
	}
	if stream != nil {
		send(evs)
		return
	}
	respond(w, resp, nil)
}

// getResponse serves GET /v1/responses/{id} from the store.
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	st, ok := s.responses.get(id)
	if !ok {
		writeError(w, openai.NotFound("no stored response "+id))
		return
	}
	writeJSON(w, http.StatusOK, st.response)
}

// deleteResponse serves DELETE /v1/responses/{id}.
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if !s.responses.delete(id) {
		writeError(w, openai.NotFound("no stored response "+id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
}
