package server

import (
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
	serveGeneration(s, w, r, openai.DecodeResponsesRequest, s.prepareResponse)
}

// prepareResponse builds the conversation (the stored one of
// previous_response_id, then the input), renders it and sets the
// generation up.
func (s *Server) prepareResponse(req *openai.ResponsesRequest) (*generation, *openai.Error) {
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		return nil, apiErr
	}
	var history []openai.Message
	if id := req.PreviousResponseID; id != "" {
		st, ok := s.responses.get(id)
		if !ok {
			return nil, openai.InvalidRequest("previous_response_id", "no stored response "+id+" (it may have been evicted or was not stored)")
		}
		history = st.conversation
	}
	msgs, tools, apiErr := req.ToChat(history)
	if apiErr != nil {
		return nil, apiErr
	}
	conv := &openai.ChatRequest{Messages: msgs, Tools: tools}
	messages, apiErr := conv.TemplateMessages()
	if apiErr != nil {
		return nil, apiErr
	}
	prompt, apiErr := s.buildChatPrompt(m, chatInput{messages: messages, tools: conv.TemplateTools(), defs: tools,
		choice: req.ChatToolChoice(), thinking: req.EnableThinking()})
	if apiErr != nil {
		return nil, apiErr
	}
	asked, set := req.MaxNewTokens()
	maxNew, apiErr := budget(m, len(prompt.ids), asked, set)
	if apiErr != nil {
		return nil, apiErr
	}
	p := genParams{prompt: prompt.ids, maxNew: maxNew, parse: prompt.parse, constraint: prompt.constraint, boundary: turnBoundary(m, prompt.ids),
		oneCall:     prompt.parse.Tools != nil && req.ParallelToolCalls != nil && !*req.ParallelToolCalls,
		sampler:     samplerConfig(m, req.Sampling),
		keepSpecial: req.SkipSpecialTokens != nil && !*req.SkipSpecialTokens}
	n, limited := req.ThinkingBudget()
	p.think = newThinkBudget(m, n, limited)
	if req.Text != nil {
		if apiErr := p.constrainFormat(m, req.Text.Format.ResponseFormat(), "text.format"); apiErr != nil {
			return nil, apiErr
		}
	}
	p.leaveRoomForAnswer(m)
	a := &responseAnswer{s: s, m: m, req: req, history: history,
		b: openai.NewResponseBuilder(openai.NewResponse(newID("resp_"), m.ID, time.Now().Unix(), req))}
	return &generation{model: m, params: p, stream: req.Stream, answer: a}, nil
}

// responseAnswer is a Responses API response, whole or as its stream of
// events; either way a finished response is stored for
// previous_response_id unless the request said store false.
type responseAnswer struct {
	s       *Server
	m       *Model
	req     *openai.ResponsesRequest
	history []openai.Message // the stored conversation continued
	b       *openai.ResponseBuilder
}

// send streams events.
func send(w *sse.Writer, evs []openai.ResponseEvent) error {
	for _, e := range evs {
		if err := w.Event(e.Type, e); err != nil {
			return err
		}
	}
	return nil
}

func (a *responseAnswer) open(w *sse.Writer) error { return send(w, a.b.Start()) }

// events turns one token's events into the response's.
func (a *responseAnswer) events(st genStep) []openai.ResponseEvent {
	var evs []openai.ResponseEvent
	for _, e := range st.events {
		switch e.Kind {
		case output.Reasoning:
			evs = append(evs, a.b.Reasoning(e.Text)...)
		case output.Content:
			evs = append(evs, a.b.Text(e.Text)...)
		case output.ToolCallStart:
			evs = append(evs, a.b.FunctionCall(e.ID, e.Name)...)
		case output.ToolCallArguments:
			evs = append(evs, a.b.Arguments(e.Text)...)
		}
	}
	return evs
}

func (a *responseAnswer) step(w *sse.Writer, st genStep) error { return send(w, a.events(st)) }

// finish completes the response, stores it and returns its last events.
func (a *responseAnswer) finish(res *genResult) []openai.ResponseEvent {
	incomplete := ""
	if res.finish == "length" {
		incomplete = "max_output_tokens"
	}
	evs := a.b.Finish(openai.NewResponseUsage(res.promptTokens, res.completionTokens, res.cachedTokens, res.reasoningTokens), incomplete)
	resp := a.b.Response()
	if resp.Store {
		history, _ := a.req.Conversation(a.history)
		a.s.responses.put(resp.ID, stored{response: resp, conversation: append(history, openai.OutputMessages(resp.Output)...)})
	}
	return evs
}

func (a *responseAnswer) close(w *sse.Writer, res *genResult) error { return send(w, a.finish(res)) }

func (a *responseAnswer) fail(w *sse.Writer, e *openai.Error) { send(w, a.b.Fail(e)) }

func (a *responseAnswer) whole(res *genResult) any {
	a.events(genStep{events: res.events}) // the builder sees what a stream would
	a.finish(res)
	return a.b.Response()
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
