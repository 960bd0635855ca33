// Package sse writes Server-Sent Events the way OpenAI streams do: each
// chunk is one "data: JSON" event flushed to the client at once, and the
// stream ends with "data: [DONE]". Named events ("event: NAME") carry the
// Responses API stream.
package sse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Writer writes one event stream. It is safe for concurrent use (a
// keep-alive goroutine may write comments while the decoder writes data);
// after the first write error every call returns that error.
type Writer struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	err error
}

// New starts an event stream: it sets the SSE headers (Content-Type
// text/event-stream, Cache-Control no-cache, Connection keep-alive,
// X-Accel-Buffering no so that proxies pass events on), writes status 200
// and flushes, so that the client sees the stream open before the first
// token. It fails (wrapping http.ErrNotSupported) when w cannot flush,
// since a buffered stream would not be live.
func New(w http.ResponseWriter) (*Writer, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w)}
	if err := s.rc.Flush(); err != nil {
		return nil, fmt.Errorf("sse: flush: %w", err)
	}
	return s, nil
}

// Data sends v as one "data: JSON" event, the shape of an OpenAI chat or
// completions chunk, and flushes it. An error means the client is gone and
// the caller should stop generating.
func (s *Writer) Data(v any) error {
	return s.send("", v)
}

// Event sends v as a named event ("event: NAME" then "data: JSON"), the
// shape of a Responses API stream, and flushes it.
func (s *Writer) Event(name string, v any) error {
	if name == "" || strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("sse: invalid event name %q", name)
	}
	return s.send(name, v)
}

// Done sends the "data: [DONE]" sentinel that ends an OpenAI stream.
func (s *Writer) Done() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	s.buf.WriteString("data: [DONE]\n\n")
	return s.flushLocked()
}

// Comment sends an SSE comment line (": TEXT"), which clients ignore; it
// keeps idle connections and proxies from timing out during a long prefill.
func (s *Writer) Comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Reset()
	for _, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		s.buf.WriteString(": ")
		s.buf.WriteString(strings.TrimSuffix(line, "\r"))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return s.flushLocked()
}

// send encodes and writes one event. The JSON is compact and does not escape
// HTML characters, so that "<tool_call>" reads as written; compact JSON holds
// no raw newline, so one data line carries it.
func (s *Writer) send(name string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.buf.Reset()
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	enc := json.NewEncoder(&s.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Nothing was sent: the stream stays usable.
		return fmt.Errorf("sse: encode: %w", err)
	}
	// Encode ended the line; a blank line ends the event.
	s.buf.WriteByte('\n')
	return s.flushLocked()
}

// flushLocked writes the buffered event and flushes it to the client,
// remembering the first failure.
func (s *Writer) flushLocked() error {
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(s.buf.Bytes()); err != nil {
		s.err = fmt.Errorf("sse: write: %w", err)
		return s.err
	}
	if err := s.rc.Flush(); err != nil {
		s.err = fmt.Errorf("sse: flush: %w", err)
		return s.err
	}
	return nil
}
