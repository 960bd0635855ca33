package server

import (
	"net/http"
	"time"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/server/sse"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	serveGeneration(s, w, r, openai.DecodeChatRequest, s.prepareChat)
}

// prepareChat renders the conversation with the checkpoint's template and
// sets the generation up.
func (s *Server) prepareChat(req *openai.ChatRequest) (*generation, *openai.Error) {
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		return nil, apiErr
	}
	prompt, apiErr := s.chatPromptOf(m, req)
	if apiErr != nil {
		return nil, apiErr
	}
	asked, set := req.MaxNewTokens()
	maxNew, apiErr := budget(m, len(prompt.ids), asked, set)
	if apiErr != nil {
		return nil, apiErr
	}
	prompt.parse.Stop = req.StopStrings()
	n, limited := req.ThinkingBudget()
	p := genParams{prompt: prompt.ids, maxNew: maxNew, parse: prompt.parse, constraint: prompt.constraint, logprobs: req.Logprobs,
		boundary: turnBoundary(m, prompt.ids), noCache: req.CachePrompt != nil && !*req.CachePrompt,
		oneCall:     prompt.parse.Tools != nil && req.ParallelToolCalls != nil && !*req.ParallelToolCalls,
		sampler:     samplerConfig(m, req.Sampling),
		keepSpecial: req.SkipSpecialTokens != nil && !*req.SkipSpecialTokens}
	if req.TopLogprobs != nil {
		p.topLogprobs = *req.TopLogprobs
	}
	p.think = newThinkBudget(m, n, limited)
	if apiErr := p.constrainFormat(m, req.ResponseFormat, "response_format"); apiErr != nil {
		return nil, apiErr
	}
	p.leaveRoomForAnswer(m)
	a := &chatAnswer{ck: openai.ChatChunker{ID: newID("chatcmpl-"), Model: m.ID, Created: time.Now().Unix()},
		logprobs: req.Logprobs, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	return &generation{model: m, params: p, stream: req.Stream, answer: a}, nil
}

// chatAnswer is a chat completion, whole or as chunks.
type chatAnswer struct {
	ck       openai.ChatChunker
	logprobs bool
	usage    bool           // stream_options.include_usage
	pending  []tokenLogprob // logprobs of tokens whose text is still held back
}

func (a *chatAnswer) open(w *sse.Writer) error { return w.Data(a.ck.Role()) }

func (a *chatAnswer) step(w *sse.Writer, st genStep) error {
	if st.logprob != nil {
		a.pending = append(a.pending, *st.logprob)
	}
	for _, e := range st.events {
		var lps *openai.Logprobs
		if a.logprobs && len(a.pending) > 0 {
			lps, a.pending = chatLogprobs(a.pending), nil
		}
		var c openai.ChatCompletionChunk
		switch e.Kind {
		case output.Reasoning:
			c = a.ck.Reasoning(e.Text, lps)
		case output.Content:
			c = a.ck.Content(e.Text, lps)
		case output.ToolCallStart:
			c = a.ck.ToolCallStart(e.Index, e.ID, e.Name)
		case output.ToolCallArguments:
			c = a.ck.ToolCallArguments(e.Index, e.Text)
		}
		if lps != nil && c.Choices[0].Logprobs == nil {
			c.Choices[0].Logprobs = lps
		}
		if err := w.Data(c); err != nil {
			return err
		}
	}
	return nil
}

func (a *chatAnswer) close(w *sse.Writer, res *genResult) error {
	fin := a.ck.Finish(res.finish)
	if a.logprobs && len(a.pending) > 0 {
		fin.Choices[0].Logprobs = chatLogprobs(a.pending)
	}
	if err := w.Data(fin); err != nil {
		return err
	}
	if a.usage {
		if err := w.Data(a.ck.Usage(chatUsage(res))); err != nil {
			return err
		}
	}
	return w.Done()
}

func (a *chatAnswer) fail(w *sse.Writer, e *openai.Error) { failStream(w, e) }

// whole is the non-streaming response.
func (a *chatAnswer) whole(res *genResult) any {
	var calls []openai.ToolCall
	for _, tc := range res.result.ToolCalls {
		calls = append(calls, openai.ToolCall{ID: tc.ID, Type: "function", Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	msg := openai.NewChatMessage(res.result.Content, res.result.Reasoning, calls)
	var lps *openai.Logprobs
	if a.logprobs {
		lps = chatLogprobs(res.logprobs)
	}
	return openai.NewChatCompletion(a.ck.ID, a.ck.Model, a.ck.Created, msg, lps, res.finish, chatUsage(res))
}

// failStream ends a chat or completions stream after a failure: an error
// chunk, then [DONE].
func failStream(w *sse.Writer, e *openai.Error) {
	if w.Data(e) == nil {
		w.Done()
	}
}

func usage(res *genResult) openai.Usage {
	return openai.NewUsage(res.promptTokens, res.completionTokens, res.cachedTokens)
}

// chatUsage is usage with the reasoning tokens of a chat answer.
func chatUsage(res *genResult) openai.Usage {
	u := usage(res)
	u.CompletionTokensDetails = &openai.CompletionTokensDetails{ReasoningTokens: res.reasoningTokens}
	return u
}

func chatLogprobs(lps []tokenLogprob) *openai.Logprobs {
	out := &openai.Logprobs{Content: []openai.TokenLogprob{}}
	for _, l := range lps {
		t := openai.TokenLogprob{Token: l.token, Logprob: l.Logprob, Bytes: openai.TokenBytes(l.bytes), TopLogprobs: []openai.TopLogprob{}}
		for _, a := range l.top {
			t.TopLogprobs = append(t.TopLogprobs, openai.TopLogprob{Token: a.token, Logprob: a.logprob, Bytes: openai.TokenBytes(a.bytes)})
		}
		out.Content = append(out.Content, t)
	}
	return out
}
