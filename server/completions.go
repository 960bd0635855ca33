package server

import (
	"context"
	"net/http"
	"time"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/server/sse"
)

// completions serves POST /v1/completions: a raw prompt (text or token
// ids), no chat template, no reasoning or tool parsing.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, ok := decodeBody(s, w, r, openai.DecodeCompletionRequest)
	if !ok {
		return
	}
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	var ids []int32
	promptText := req.Prompt.Text
	if req.Prompt.Tokens != nil {
		ids = req.Prompt.Tokens
		for i, id := range ids {
			if id < 0 || int(id) >= m.Tokenizer.Size() {
				writeError(w, openai.InvalidRequest("prompt", "token id "+itoa(int(id))+" at index "+itoa(i)+" is outside the vocabulary"))
				return
			}
		}
		text, err := m.Tokenizer.Decode(ids, false)
		if err != nil {
			writeError(w, openai.InvalidRequest("prompt", err.Error()))
			return
		}
		promptText = text
	} else {
		ids = m.Tokenizer.Encode(promptText)
	}
	if len(ids) == 0 {
		writeError(w, openai.InvalidRequest("prompt", "the prompt is empty"))
		return
	}
	asked, set := 16, true // the OpenAI default for completions
	if req.MaxTokens != nil {
		asked = *req.MaxTokens
	}
	maxNew, apiErr := budget(m, len(ids), asked, set)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	p := genParams{prompt: ids, maxNew: maxNew, noCache: req.CachePrompt != nil && !*req.CachePrompt,
		parse: output.Options{Raw: true, Stop: req.Stop},
		sampler: samplerConfig(m, samplingRequest{temperature: req.Temperature, topP: req.TopP, minP: req.MinP, topK: req.TopK,
			presencePenalty: req.PresencePenalty, frequencyPenalty: req.FrequencyPenalty, repetitionPenalty: req.RepetitionPenalty, seed: req.Seed})}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	done, apiErr := s.admit(ctx)
	if apiErr != nil {
		respond(w, nil, apiErr)
		return
	}
	defer done()

	id, created := newID("cmpl-"), time.Now().Unix()
	echo := ""
	if req.Echo {
		echo = promptText
	}
	if !req.Stream {
		res, err := s.generate(ctx, m, p, func(genStep) error { return nil })
		if err != nil {
			respond(w, nil, failure(ctx, err))
			return
		}
		var lps *openai.CompletionLogprobs
		if p.logprobs {
			lps = completionLogprobs(res.logprobs, len(echo))
		}
		respond(w, openai.NewCompletion(id, m.ID, created, echo+res.result.Content, lps, res.finish, usage(res)), nil)
		return
	}
	stream, err := sse.New(w)
	if err != nil {
		return
	}
	send := func(text string, lps []tokenLogprob, finish string, offset int) error {
		var l *openai.CompletionLogprobs
		if p.logprobs && len(lps) > 0 {
			l = completionLogprobs(lps, offset)
		}
		return stream.Data(openai.NewCompletionChunk(id, m.ID, created, text, l, finish))
	}
	offset := len(echo)
	if echo != "" {
		if send(echo, nil, "", 0) != nil {
			leftEarly(w)
			return
		}
	}
	var pending []tokenLogprob
	res, err := s.generate(ctx, m, p, func(st genStep) error {
		if st.logprob != nil {
			pending = append(pending, *st.logprob)
		}
		for _, e := range st.events {
			if err := send(e.Text, pending, "", offset); err != nil {
				cancel()
				return err
			}
			offset += len(e.Text)
			pending = nil
		}
		return nil
	})
	if err != nil {
		streamFailed(ctx, w, stream, err)
		return
	}
	if send("", pending, res.finish, offset) != nil {
		leftEarly(w)
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		stream.Data(openai.NewCompletionUsageChunk(id, m.ID, created, usage(res)))
	}
	stream.Done()
}

// completionLogprobs is the legacy logprobs object; offsets count from the
// start of the returned text.
func completionLogprobs(lps []tokenLogprob, offset int) *openai.CompletionLogprobs {
	out := &openai.CompletionLogprobs{}
	for i := range lps {
		l := &lps[i]
		out.Tokens = append(out.Tokens, l.token)
		out.TokenLogprobs = append(out.TokenLogprobs, &l.Logprob)
		top := map[string]float64{}
		for _, a := range l.top {
			top[a.token] = a.logprob
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(l.token)
	}
	return out
}
