package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/server/queue"
)

// genParams is one generation, independent of the endpoint.
type genParams struct {
	prompt      []int32
	maxNew      int
	sampler     runtime.SamplerConfig
	logprobs    bool
	topLogprobs int
	parse       output.Options
	// oneCall ends the generation once the first tool call is complete
	// (parallel_tool_calls false).
	oneCall bool
	// boundary is the chat turn boundary in prompt (0: none): the prefix
	// cache snapshots the state there for the conversation's next turn.
	boundary int
	// noCache keeps the request out of the prefix cache (cache_prompt false).
	noCache bool
	// constraint restricts the answer's tokens (constrained decoding); nil
	// leaves them free.
	constraint Constraint
	// think bounds the reasoning (thinking_budget, reasoning_effort).
	think thinkBudget
	// keepSpecial puts control tokens in the text (skip_special_tokens
	// false); by default the parser reads them as markup or drops them.
	keepSpecial bool
}

// genStep is what one sampled token produced.
type genStep struct {
	events  []output.Event
	text    string // the decoded text piece (raw, before parsing)
	logprob *tokenLogprob
}

// tokenLogprob is a generated token's log-probability with its text.
type tokenLogprob struct {
	runtime.TokenLogprob
	token string
	bytes []byte
	top   []alternative
}

type alternative struct {
	token   string
	bytes   []byte
	logprob float64
}

// genResult is the whole generation.
type genResult struct {
	promptTokens, completionTokens int
	cachedTokens                   int    // prompt tokens restored from the prefix cache
	reasoningTokens                int    // completion tokens inside the reasoning, its closing tag included
	finish                         string // stop, length or tool_calls
	result                         output.Result
	events                         []output.Event // every event, in order
	text                           string         // raw decoded text (completions)
	logprobs                       []tokenLogprob
}

// generate runs a prompt and samples until a stop token, a stop string, the
// first complete tool call when only one is allowed, or the token budget,
// calling emit (when not nil) for every token's events as they are decoded
// (live streaming). ctx is checked between decode steps, so a client that
// leaves stops the engine whatever the engine itself checks. Before each
// token of the answer p.constraint, when set, masks the vocabulary
// (Constraint).
func (s *Server) generate(ctx context.Context, m *Model, p genParams, emit func(genStep) error) (*genResult, error) {
	sampler, err := runtime.NewSampler(p.sampler)
	if err != nil {
		return nil, err
	}
	sampler.SetPrompt(p.prompt)
	res := &genResult{promptTokens: len(p.prompt)}
	parser := output.New(p.parse)
	if emit == nil {
		emit = func(genStep) error { return nil }
	}
	var mask runtime.Mask // the constraint's, reused at every step
	// noStop is every token but the stop ids: a constrained answer must
	// follow the reasoning, so the reasoning may not end the turn.
	var noStop runtime.Mask
	if p.constraint != nil {
		mask = make(runtime.Mask, runtime.MaskWords(m.Engine.Vocab()))
		noStop = make(runtime.Mask, len(mask))
		for i := range noStop {
			noStop[i] = ^uint32(0)
		}
		for _, id := range m.StopIDs {
			if w := int(id) / 32; id >= 0 && w < len(noStop) {
				noStop[w] &^= 1 << (uint(id) % 32)
			}
		}
	}
	callDone := false // the one allowed tool call is complete
	var args string   // the arguments of the call being parsed
	add := func(st genStep) error {
		if p.oneCall {
			for i, e := range st.events {
				if callDone {
					st.events = st.events[:i] // nothing after the call
					break
				}
				switch e.Kind {
				case output.ToolCallStart:
					args = ""
				case output.ToolCallArguments:
					// The arguments become a valid object only with their closing brace.
					args += e.Text
					callDone = strings.HasSuffix(e.Text, "}") && json.Valid([]byte(args))
				}
			}
		}
		res.result.Add(st.events...)
		res.events = append(res.events, st.events...)
		res.text += st.text
		if st.logprob != nil {
			res.logprobs = append(res.logprobs, *st.logprob)
		}
		if len(st.events) == 0 && st.logprob == nil && st.text == "" {
			return nil
		}
		return emit(st)
	}
	ds, dev, onDevice := deviceSampling(m, p)
	start := time.Now()
	parts := partsOf(ctx)
	parts.mark(partPrepare) // the stream's headers, the sampler
	logits, cached, seq, err := s.startSequence(ctx, m, p.prompt, p.boundary, !p.noCache)
	if err != nil {
		return nil, err
	}
	defer func() { release(seq.pending) }() // nil once committed
	res.cachedTokens = cached
	dec := m.Tokenizer.NewDecoder(!p.keepSpecial)
	stopped := false
	var prev int32 // the last token drawn
	unfed := false // prev is drawn on the device but not yet fed to the engine
	// firstToken records the time to the first token, drawn or written by
	// the budget; it counts from the request's arrival, as the client
	// waits: queue, template, prefill.
	firstToken := func() {
		if res.completionTokens != 1 {
			return
		}
		arrived, ok := ctx.Value(arrivalKey).(time.Time)
		if !ok {
			arrived = start
		}
		s.metrics.TTFT(time.Since(arrived))
		if parts.finish() {
			for i, d := range parts.d {
				s.metrics.TTFTPart(partNames[i], d)
			}
		}
	}
	// write adds one completion token's text to the output.
	write := func(tok int32, lp *tokenLogprob) error {
		if parser.InReasoning() {
			res.reasoningTokens++
		}
		if !p.keepSpecial && m.Tokenizer.Added(tok) {
			// A control token is markup or nothing, never text. Bytes held
			// back for an unfinished UTF-8 sequence end at it: they belong
			// to the text before it (the reasoning, say), not after it.
			held := dec.Flush()
			var events []output.Event
			if held != "" {
				events = parser.Write(held)
			}
			events = append(events, parser.Control(string(m.Tokenizer.TokenBytes(tok)))...)
			return add(genStep{events: events, text: held, logprob: lp})
		}
		piece, err := dec.Add(tok)
		if err != nil {
			return err
		}
		return add(genStep{events: parser.Write(piece), text: piece, logprob: lp})
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if p.think.limited && parser.InReasoning() && res.reasoningTokens >= p.think.n {
			// The budget is spent: close the reasoning as the template
			// does; the answer is drawn after it.
			if err := seq.settle(); err != nil {
				return nil, err
			}
			if unfed {
				if logits, err = m.Engine.Decode(ctx, prev); err != nil {
					return nil, err
				}
				unfed = false
			}
			full := false
			for _, tok := range p.think.close {
				res.completionTokens++
				firstToken()
				if err := write(tok, nil); err != nil {
					return nil, err
				}
				if full = res.completionTokens >= p.maxNew; full {
					break
				}
				if err := seq.settle(); err != nil {
					return nil, err
				}
				if logits, err = m.Engine.Decode(ctx, tok); err != nil {
					return nil, err
				}
			}
			if full {
				res.finish = "length"
				break
			}
			if parser.InReasoning() { // the close did not close: never again
				p.think.limited = false
			}
			continue
		}
		var tok int32
		var lp *tokenLogprob
		// The constraint applies to the answer, never to the reasoning.
		constrained := p.constraint != nil && !parser.InReasoning()
		var allowed runtime.Mask
		if constrained {
			clear(mask)
			restricted, err := p.constraint.Mask(mask)
			if err != nil {
				return nil, fmt.Errorf("constraint: %w", err)
			}
			if restricted {
				allowed = mask
			}
		} else if p.constraint != nil {
			allowed = noStop
		}
		switch {
		case onDevice:
			// The first draw is from the prompt's logits; every later one
			// decodes the token before it on the device first. The mask,
			// when there is one, goes to the device with the draw: the
			// logits never leave it.
			dev.Mask = allowed
			var l float32
			if unfed {
				if err := seq.settle(); err != nil {
					return nil, err
				}
				tok, l, err = ds.DecodeSampled(ctx, prev, dev, res.completionTokens)
			} else {
				tok, l, err = ds.SampleLogits(ctx, logits, dev, res.completionTokens)
			}
			unfed = false
			if err != nil {
				return nil, err
			}
			if p.logprobs {
				lp = s.describe(m, runtime.TokenLogprob{ID: tok, Logprob: float64(l)})
			}
		case p.logprobs:
			t, l, err := sampler.SampleLogprobsMasked(logits, p.topLogprobs, allowed)
			if err != nil {
				return nil, err
			}
			tok, lp = t, s.describe(m, l)
		default:
			if tok, err = sampler.SampleMasked(logits, allowed); err != nil {
				return nil, err
			}
		}
		if constrained {
			if err := p.constraint.Advance(tok); err != nil {
				return nil, fmt.Errorf("constraint: %w", err)
			}
		}
		prev = tok
		res.completionTokens++
		firstToken()
		if slices.Contains(m.StopIDs, tok) {
			res.finish = "stop"
			break
		}
		if err := write(tok, lp); err != nil {
			return nil, err
		}
		if parser.Stopped() || callDone {
			res.finish, stopped = "stop", true
			break
		}
		if res.completionTokens >= p.maxNew {
			res.finish = "length"
			break
		}
		if onDevice {
			unfed = true // the next draw decodes tok
			continue
		}
		if err := seq.settle(); err != nil {
			return nil, err
		}
		if logits, err = m.Engine.Decode(ctx, tok); err != nil {
			return nil, err
		}
	}
	if err := seq.settle(); err != nil { // the engine has not moved since the prompt's end
		return nil, err
	}
	var tail []output.Event
	var text string
	if !stopped {
		text = dec.Flush()
		tail = parser.Write(text)
	}
	tail = append(tail, parser.Close()...)
	if err := add(genStep{events: tail, text: text}); err != nil {
		return nil, err
	}
	if parser.HasToolCalls() && res.finish == "stop" {
		res.finish = "tool_calls"
	}
	if d := time.Since(start).Seconds(); d > 0 && res.completionTokens > 1 {
		s.metrics.DecodeRate(float64(res.completionTokens) / d)
	}
	s.metrics.Tokens(res.promptTokens, res.completionTokens)
	s.commit(seq.pending)
	seq.pending = nil
	return res, nil
}

// deviceSampling reports whether the generation samples on the device, and
// with what: the engine must offer it, and the request must need nothing
// only the host Sampler does — presence, frequency or repetition penalties,
// alternatives in the logprobs (top_logprobs). A token constraint's mask
// goes to the device sampler with each draw; a greedy request without
// logprobs may decode with the certified int8 LM head (the same tokens).
// Either way a request is sampled the same whether it streams or not, and a
// seed reproduces it.
func deviceSampling(m *Model, p genParams) (DeviceSampler, runtime.DeviceSampling, bool) {
	ds, ok := m.Engine.(DeviceSampler)
	if !ok || !ds.CanSample() || p.topLogprobs > 0 {
		return nil, runtime.DeviceSampling{}, false
	}
	dev, ok := runtime.DeviceSamplingFor(p.sampler)
	if !ok || dev.Validate() != nil {
		return nil, runtime.DeviceSampling{}, false
	}
	// A greedy draw may take the certified int8 LM head, which has no
	// logprob: only when the response shows none.
	dev.NeedLogprob = p.logprobs
	return ds, dev, true
}

// describe adds token text to a logprob.
func (s *Server) describe(m *Model, l runtime.TokenLogprob) *tokenLogprob {
	out := &tokenLogprob{TokenLogprob: l, bytes: m.Tokenizer.TokenBytes(l.ID)}
	out.token = string(out.bytes)
	for _, a := range l.Top {
		b := m.Tokenizer.TokenBytes(a.ID)
		out.top = append(out.top, alternative{token: string(b), bytes: b, logprob: a.Logprob})
	}
	return out
}

// admit takes a place in the queue and waits for the engine, before any
// response header is written, so 429 and 503 stay real statuses. The
// returned done must be called when the request leaves the engine.
func (s *Server) admit(ctx context.Context) (done func(), apiErr *openai.Error) {
	t, err := s.queue.Admit()
	switch {
	case errors.Is(err, queue.ErrFull):
		return nil, openai.QueueFull()
	case errors.Is(err, queue.ErrClosed):
		return nil, openai.ShuttingDown()
	case err != nil:
		return nil, openai.Internal(err.Error())
	}
	waitStart := time.Now()
	if err := t.Wait(ctx); err != nil {
		switch {
		case errors.Is(context.Cause(ctx), errShuttingDown):
			return nil, openai.ShuttingDown()
		case errors.Is(err, queue.ErrWaitTimeout):
			return nil, openai.QueueTimeout()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, openai.RequestTimeout()
		default:
			return nil, clientGone
		}
	}
	s.metrics.QueueWait(time.Since(waitStart))
	return t.Done, nil
}

// clientGone marks a request whose client left: nothing more is written.
var clientGone = &openai.Error{Status: 499, Message: "client closed the request", Type: "invalid_request_error", Code: "client_closed_request"}

// failure maps a generation error to an API error.
func failure(ctx context.Context, err error) *openai.Error {
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.Is(context.Cause(ctx), errShuttingDown):
		// Cancelled at the drain deadline.
		return openai.ShuttingDown()
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return openai.RequestTimeout()
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return clientGone
	}
	return openai.Internal(err.Error())
}

// respond writes a non-streaming result or error, staying silent when the
// client has gone.
func respond(w http.ResponseWriter, v any, apiErr *openai.Error) {
	switch {
	case apiErr == clientGone:
		leftEarly(w)
	case apiErr != nil:
		writeError(w, apiErr)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// leftEarly records that the client went away, so that the request is
// counted and logged as 499 (nginx's "client closed request") rather than
// as the status it never received in full.
func leftEarly(w http.ResponseWriter) {
	if sw := statusOf(w); sw != nil {
		sw.gone = true
	}
}

// statusOf finds the statusWriter that observe put around w, nil if none.
func statusOf(w http.ResponseWriter) *statusWriter {
	for {
		switch x := w.(type) {
		case *statusWriter:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}
