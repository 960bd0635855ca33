package server

import (
	"context"
	"net/http"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/server/sse"
)

// The generation endpoints (chat completions, completions, responses) share
// one path, serveGeneration: decode the body, let the endpoint turn the
// request into a generation, admit it, generate, then answer — streamed or
// whole — with usage, and map every failure to its API error. An endpoint
// gives only what differs: its decoder, how its request becomes a
// generation (prepare), and the shape of its answer (an answer).

// generation is one request of a generation endpoint as the shared path
// runs it.
type generation struct {
	model  *Model
	params genParams
	stream bool
	answer answer
}

// answer is the shape of an endpoint's response: the events of a stream
// and the body of a whole response. The stream methods return the write
// error when the client has gone.
type answer interface {
	// open writes what a stream starts with, before the first token.
	open(w *sse.Writer) error
	// step writes one token's events.
	step(w *sse.Writer, st genStep) error
	// close ends a successful stream: finish, usage and the end marker.
	close(w *sse.Writer, res *genResult) error
	// fail ends a stream whose generation failed after the headers.
	fail(w *sse.Writer, e *openai.Error)
	// whole is a successful non-streamed response's body.
	whole(res *genResult) any
}

// serveGeneration is the path every generation endpoint shares. Admission
// happens before any header is written, so 429 and 503 stay real statuses;
// an error after a stream's headers goes to answer.fail.
func serveGeneration[R any](s *Server, w http.ResponseWriter, r *http.Request, decode func([]byte) (R, *openai.Error), prepare func(R) (*generation, *openai.Error)) {
	parts := partsOf(r.Context())
	req, ok := decodeBody(s, w, r, decode)
	if !ok {
		return
	}
	parts.mark(partRead)
	g, apiErr := prepare(req)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	parts.mark(partPrepare)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	done, apiErr := s.admit(ctx)
	if apiErr != nil {
		respond(w, nil, apiErr)
		return
	}
	defer done()
	parts.mark(partQueue)

	if !g.stream {
		res, err := s.generate(ctx, g.model, g.params, nil)
		if err != nil {
			respond(w, nil, failure(ctx, err))
			return
		}
		respond(w, g.answer.whole(res), nil)
		return
	}
	stream, err := sse.New(w)
	if err != nil {
		return
	}
	if g.answer.open(stream) != nil {
		leftEarly(w)
		return
	}
	res, err := s.generate(ctx, g.model, g.params, func(st genStep) error {
		if err := g.answer.step(stream, st); err != nil {
			cancel() // the client has gone: stop the engine
			return err
		}
		return nil
	})
	if err != nil {
		if e := failure(ctx, err); e != clientGone {
			g.answer.fail(stream, e)
			return
		}
		leftEarly(w)
		return
	}
	if g.answer.close(stream, res) != nil {
		leftEarly(w)
	}
}
