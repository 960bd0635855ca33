package server

import (
	"net/http"
	"time"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/server/sse"
)

// completions serves POST /v1/completions: a raw prompt (text or token
// ids), no chat template, no reasoning or tool parsing.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	serveGeneration(s, w, r, openai.DecodeCompletionRequest, s.prepareCompletion)
}

// prepareCompletion tokenizes the prompt and sets the generation up.
func (s *Server) prepareCompletion(req *openai.CompletionRequest) (*generation, *openai.Error) {
	m, apiErr := s.serving(req.Model)
	if apiErr != nil {
		return nil, apiErr
	}
	var ids []int32
	promptText := req.Prompt.Text
	if req.Prompt.Tokens != nil {
		ids = req.Prompt.Tokens
		for i, id := range ids {
			if id < 0 || int(id) >= m.Tokenizer.Size() {
				return nil, openai.InvalidRequest("prompt", "token id "+itoa(int(id))+" at index "+itoa(i)+" is outside the vocabulary")
			}
			if !m.Tokenizer.Known(id) {
				return nil, openai.InvalidRequest("prompt", "token id "+itoa(int(id))+" at index "+itoa(i)+" is not a token of the vocabulary")
			}
		}
		if req.Echo { // the text only to echo it: a long prompt's decode is on its TTFT
			text, err := m.Tokenizer.Decode(ids, false)
			if err != nil {
				return nil, openai.InvalidRequest("prompt", err.Error())
			}
			promptText = text
		}
	} else {
		ids = m.Tokenizer.Encode(promptText)
	}
	if len(ids) == 0 {
		return nil, openai.InvalidRequest("prompt", "the prompt is empty")
	}
	asked, set := 16, true // the OpenAI default for completions
	if req.MaxTokens != nil {
		asked = *req.MaxTokens
	}
	maxNew, apiErr := budget(m, len(ids), asked, set)
	if apiErr != nil {
		return nil, apiErr
	}
	p := genParams{prompt: ids, maxNew: maxNew, noCache: req.CachePrompt != nil && !*req.CachePrompt,
		parse: output.Options{Raw: true, Stop: req.Stop}, sampler: samplerConfig(m, req.Sampling),
		keepSpecial: req.SkipSpecialTokens != nil && !*req.SkipSpecialTokens}
	if req.Logprobs != nil {
		p.logprobs, p.topLogprobs = true, *req.Logprobs
	}
	a := &completionAnswer{id: newID("cmpl-"), model: m.ID, created: time.Now().Unix(), logprobs: p.logprobs,
		usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	if req.Echo {
		a.echo = promptText
	}
	a.offset = len(a.echo)
	return &generation{model: m, params: p, stream: req.Stream, answer: a}, nil
}

// completionAnswer is a text completion, whole or as chunks.
type completionAnswer struct {
	id, model string
	created   int64
	echo      string // the prompt, when echoed
	logprobs  bool
	usage     bool           // stream_options.include_usage
	offset    int            // text offset of the next streamed token
	pending   []tokenLogprob // logprobs of tokens whose text is still held back
}

// send streams one chunk.
func (a *completionAnswer) send(w *sse.Writer, text, finish string) error {
	var l *openai.CompletionLogprobs
	if a.logprobs && len(a.pending) > 0 {
		l = completionLogprobs(a.pending, a.offset)
	}
	a.pending = nil
	a.offset += len(text)
	return w.Data(openai.NewCompletionChunk(a.id, a.model, a.created, text, l, finish))
}

func (a *completionAnswer) open(w *sse.Writer) error {
	if a.echo == "" {
		return nil
	}
	a.offset = 0
	return a.send(w, a.echo, "")
}

func (a *completionAnswer) step(w *sse.Writer, st genStep) error {
	if st.logprob != nil {
		a.pending = append(a.pending, *st.logprob)
	}
	for _, e := range st.events {
		if err := a.send(w, e.Text, ""); err != nil {
			return err
		}
	}
	return nil
}

func (a *completionAnswer) close(w *sse.Writer, res *genResult) error {
	if err := a.send(w, "", res.finish); err != nil {
		return err
	}
	if a.usage {
		if err := w.Data(openai.NewCompletionUsageChunk(a.id, a.model, a.created, usage(res))); err != nil {
			return err
		}
	}
	return w.Done()
}

func (a *completionAnswer) fail(w *sse.Writer, e *openai.Error) { failStream(w, e) }

func (a *completionAnswer) whole(res *genResult) any {
	var lps *openai.CompletionLogprobs
	if a.logprobs {
		lps = completionLogprobs(res.logprobs, len(a.echo))
	}
	return openai.NewCompletion(a.id, a.model, a.created, a.echo+res.result.Content, lps, res.finish, usage(res))
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
