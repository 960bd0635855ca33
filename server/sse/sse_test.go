package sse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type chunk struct {
	ID      string `json:"id"`
	Content string `json:"content,omitempty"`
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(*Writer) error
		want  string
	}{
		{
			name:  "data",
			write: func(s *Writer) error { return s.Data(chunk{ID: "c1", Content: "Hi"}) },
			want:  "data: {\"id\":\"c1\",\"content\":\"Hi\"}\n\n",
		},
		{
			name: "html characters kept, newlines escaped",
			write: func(s *Writer) error {
				return s.Data(chunk{ID: "c", Content: "<tool_call>\n&"})
			},
			want: "data: {\"id\":\"c\",\"content\":\"<tool_call>\\n&\"}\n\n",
		},
		{
			name: "raw JSON is compacted onto one line",
			write: func(s *Writer) error {
				return s.Data(jsonRaw("{\n  \"a\": [1,\n 2]\n}"))
			},
			want: "data: {\"a\":[1,2]}\n\n",
		},
		{
			name:  "named event",
			write: func(s *Writer) error { return s.Event("response.created", map[string]int{"n": 1}) },
			want:  "event: response.created\ndata: {\"n\":1}\n\n",
		},
		{
			name:  "done",
			write: func(s *Writer) error { return s.Done() },
			want:  "data: [DONE]\n\n",
		},
		{
			name:  "comment",
			write: func(s *Writer) error { return s.Comment("keep-alive\r\nsecond") },
			want:  ": keep-alive\n: second\n\n",
		},
		{
			name: "a full stream",
			write: func(s *Writer) error {
				return errors.Join(
					s.Data(chunk{ID: "a"}),
					s.Data(map[string]any{"choices": []any{}}),
					s.Done(),
				)
			},
			want: "data: {\"id\":\"a\"}\n\ndata: {\"choices\":[]}\n\ndata: [DONE]\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s, err := New(rec)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := tc.write(s); err != nil {
				t.Fatalf("write: %v", err)
			}
			if diff := cmp.Diff(tc.want, rec.Body.String()); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if !rec.Flushed {
				t.Error("response was not flushed")
			}
		})
	}
}

// jsonRaw is pre-encoded JSON, as a caller holding a json.RawMessage has.
type jsonRaw string

func (r jsonRaw) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "12")
	if _, err := New(rec); err != nil {
		t.Fatalf("New: %v", err)
	}
	got := map[string]string{}
	for _, k := range []string{"Content-Type", "Cache-Control", "Connection", "X-Accel-Buffering", "Content-Length"} {
		got[k] = rec.Header().Get(k)
	}
	want := map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"Connection":        "keep-alive",
		"X-Accel-Buffering": "no",
		"Content-Length":    "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if rec.Code != http.StatusOK {
		t.Errorf("status = %d, want 200", rec.Code)
	}
}

func TestBadInput(t *testing.T) {
	rec := httptest.NewRecorder()
	s, err := New(rec)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"unencodable value", func() error { return s.Data(math.NaN()) }},
		{"empty event name", func() error { return s.Event("", 1) }},
		{"event name with newline", func() error { return s.Event("a\ndata: x", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.write(); err == nil {
				t.Fatal("want an error")
			}
		})
	}
	// Nothing was written and the stream still works.
	if err := s.Done(); err != nil {
		t.Fatalf("Done: %v", err)
	}
	if diff := cmp.Diff("data: [DONE]\n\n", rec.Body.String()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// plainWriter hides the recorder's Flush method.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }

func TestNotFlushable(t *testing.T) {
	if _, err := New(plainWriter{httptest.NewRecorder()}); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("New error = %v, want http.ErrNotSupported", err)
	}
}

// TestLive checks over a real connection that every event reaches the client
// while the handler is still running.
func TestLive(t *testing.T) {
	const events = 3
	ack := make(chan struct{})
	handlerErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerErr <- func() error {
			s, err := New(w)
			if err != nil {
				return err
			}
			for i := range events {
				if err := s.Event("delta", map[string]int{"i": i}); err != nil {
					return err
				}
				select {
				case <-ack:
				case <-time.After(2 * time.Second):
					return fmt.Errorf("event %d did not reach the client before the handler returned", i)
				}
			}
			return s.Done()
		}()
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type = %q", got)
	}
	br := bufio.NewReader(resp.Body)
	var got []string
	for range events {
		got = append(got, readEvent(t, br))
		ack <- struct{}{}
	}
	got = append(got, readEvent(t, br))
	if err := <-handlerErr; err != nil {
		t.Fatalf("handler: %v", err)
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("trailing bytes %q", rest)
	}
	want := []string{
		"event: delta\ndata: {\"i\":0}\n",
		"event: delta\ndata: {\"i\":1}\n",
		"event: delta\ndata: {\"i\":2}\n",
		"data: [DONE]\n",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// readEvent reads lines up to an event's closing blank line.
func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading event: %v (have %q)", err, b.String()+line)
		}
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

// TestClientGone checks that writes fail once the client has disconnected,
// so that the caller can stop decoding.
func TestClientGone(t *testing.T) {
	handlerErr := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlerErr <- func() error {
			s, err := New(w)
			if err != nil {
				return err
			}
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) {
				if err := s.Data(chunk{ID: "c", Content: strings.Repeat("x", 512)}); err != nil {
					// Later calls keep failing.
					if err2 := s.Done(); err2 == nil {
						return errors.New("Done succeeded after a write error")
					}
					return nil
				}
				time.Sleep(time.Millisecond)
			}
			return errors.New("writes kept succeeding after the client left")
		}()
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readEvent(t, bufio.NewReader(resp.Body))
	cancel()
	resp.Body.Close()
	if err := <-handlerErr; err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentWrites(t *testing.T) {
	rec := httptest.NewRecorder()
	s, err := New(rec)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if w%2 == 0 {
					_ = s.Data(map[string]int{"w": w, "i": i})
				} else {
					_ = s.Comment("ping")
				}
			}
		})
	}
	wg.Wait()
	events := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
	if len(events) != writers*each {
		t.Fatalf("got %d events, want %d", len(events), writers*each)
	}
	for _, e := range events {
		if e != ": ping" && (!strings.HasPrefix(e, "data: {") || strings.Contains(e, "\n")) {
			t.Fatalf("interleaved event %q", e)
		}
	}
}
