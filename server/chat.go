package server

import (
	"context"
	"net/http"
	"time"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/server/sse"
)

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody(s, w, r, openai.DecodeChatRequest)
	if !ok {
		return
	}
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != "text" {
		writeError(w, openai.Unsupported("response_format", "response_format "+rf.Type+" is not enforced by this server yet; only \"text\" is accepted"))
		return
	}
	messages, apiErr := req.TemplateMessages()
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	prompt, apiErr := s.buildChatPrompt(m, chatInput{messages: messages, tools: req.TemplateTools(), defs: req.Tools,
		choice: req.ToolChoice, kwargs: req.ChatTemplateKwargs, thinking: req.EnableThinking()})
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	asked, set := req.MaxNewTokens()
	maxNew, apiErr := budget(m, len(prompt.ids), asked, set)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	prompt.parse.Stop = req.StopStrings()
	p := genParams{prompt: prompt.ids, maxNew: maxNew, parse: prompt.parse, forced: prompt.forced, logprobs: req.Logprobs,
		boundary: turnBoundary(m, prompt.ids), noCache: req.CachePrompt != nil && !*req.CachePrompt,
		oneCall: prompt.parse.Tools != nil && req.ParallelToolCalls != nil && !*req.ParallelToolCalls,
		sampler: samplerConfig(m, samplingRequest{temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK,
			presencePenalty: req.PresencePenalty, frequencyPenalty: req.FrequencyPenalty, repetitionPenalty: req.RepetitionPenalty, seed: req.Seed})}
	if req.TopLogprobs != nil {
		p.topLogprobs = *req.TopLogprobs
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	done, apiErr := s.admit(ctx)
	if apiErr != nil {
		respond(w, nil, apiErr)
		return
	}
	defer done()

	id, created := newID("chatcmpl-"), time.Now().Unix()
	if !req.Stream {
		res, err := s.generate(ctx, m, p, func(genStep) error { return nil })
		if err != nil {
			respond(w, nil, failure(ctx, err))
			return
		}
		respond(w, chatCompletion(id, created, m.ID, res, req.Logprobs), nil)
		return
	}

	stream, err := sse.New(w)
	if err != nil {
		return
	}
	ck := openai.ChatChunker{ID: id, Model: m.ID, Created: created}
	if err := stream.Data(ck.Role()); err != nil {
		leftEarly(w)
		return
	}
	var pending []tokenLogprob // logprobs of tokens whose text is still held back
	res, err := s.generate(ctx, m, p, func(st genStep) error {
		if st.logprob != nil {
			pending = append(pending, *st.logprob)
		}
		for _, e := range st.events {
			var lps *openai.Logprobs
			if req.Logprobs && len(pending) > 0 {
				lps, pending = chatLogprobs(pending), nil
			}
			var c openai.ChatCompletionChunk
			switch e.Kind {
			case output.Reasoning:
				c = ck.Reasoning(e.Text, lps)
			case output.Content:
				c = ck.Content(e.Text, lps)
			case output.ToolCallStart:
				c = ck.ToolCallStart(e.Index, e.ID, e.Name)
			case output.ToolCallArguments:
				c = ck.ToolCallArguments(e.Index, e.Text)
			}
			if lps != nil && c.Choices[0].Logprobs == nil {
				c.Choices[0].Logprobs = lps
			}
			if err := stream.Data(c); err != nil {
				cancel()
				return err
			}
		}
		return nil
	})
	if err != nil {
		streamFailed(ctx, w, stream, err)
		return
	}
	fin := ck.Finish(res.finish)
	if req.Logprobs && len(pending) > 0 {
		fin.Choices[0].Logprobs = chatLogprobs(pending)
	}
	if stream.Data(fin) != nil {
		leftEarly(w)
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		stream.Data(ck.Usage(usage(res)))
	}
	stream.Done()
}

func usage(res *genResult) openai.Usage {
	return openai.NewUsage(res.promptTokens, res.completionTokens, res.cachedTokens)
}

// chatCompletion is the non-streaming response.
func chatCompletion(id string, created int64, model string, res *genResult, logprobs bool) openai.ChatCompletion {
	var calls []openai.ToolCall
	for _, tc := range res.result.ToolCalls {
		calls = append(calls, openai.ToolCall{ID: tc.ID, Type: "function", Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	msg := openai.NewChatMessage(res.result.Content, res.result.Reasoning, calls)
	var lps *openai.Logprobs
	if logprobs {
		lps = chatLogprobs(res.logprobs)
	}
	return openai.NewChatCompletion(id, model, created, msg, lps, res.finish, usage(res))
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
