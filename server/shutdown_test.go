package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aimaproject/aimac/server"
)

// serving is a server on a real loopback listener through Serve.
type serving struct {
	f      *fixture
	srv    *server.Server
	eng    *scripted
	base   string
	served chan error
}

func serve(t *testing.T, ctx context.Context, cfg server.Config) *serving {
	t.Helper()
	f := tiny(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &serving{f: f, srv: server.New(cfg), eng: newScripted(f), base: "http://" + ln.Addr().String(), served: make(chan error, 1)}
	s.srv.SetModel(f.model(s.eng))
	go func() { s.served <- s.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		s.srv.Shutdown()
		select {
		case <-s.served:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
		if err := s.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// returned waits for Serve's result.
func (s *serving) returned(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-s.served:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
		s.served <- nil // for the cleanup
	case <-time.After(within):
		t.Fatalf("Serve did not return within %v", within)
	}
}

// inProcess answers a request through the handler, without the listener.
func (s *serving) inProcess(method, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	s.srv.Handler().ServeHTTP(w, r)
	return w
}

// streamResult is a stream read to its end.
type streamResult struct {
	status          int
	content, finish string
	errCode         string // the code of an error chunk or body
	done            bool
	err             error
}

// startStream posts a streaming chat request and reads it in the
// background; first is closed at the first content chunk.
func startStream(ctx context.Context, base string, first chan<- struct{}) <-chan streamResult {
	return startChat(ctx, base, endless+`,"stream":true}`, first)
}

// startChat posts a chat request and reads its answer, a stream or a
// whole body, in the background; first is closed at the first content
// chunk or when the answer has ended.
func startChat(ctx context.Context, base, body string, first chan<- struct{}) <-chan streamResult {
	out := make(chan streamResult, 1)
	go func() {
		var r streamResult
		defer func() { out <- r }()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			r.err = err
			close(first)
			return
		}
		defer resp.Body.Close()
		r.status = resp.StatusCode
		if resp.Header.Get("Content-Type") != "text/event-stream" {
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
				Choices []struct {
					FinishReason string `json:"finish_reason"`
					Message      struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			raw, err := io.ReadAll(resp.Body)
			r.err = err
			json.Unmarshal(raw, &e)
			r.errCode = e.Error.Code
			if len(e.Choices) == 1 {
				r.content, r.finish = e.Choices[0].Message.Content, e.Choices[0].FinishReason
			}
			close(first)
			return
		}
		sc := bufio.NewScanner(resp.Body)
		signalled := false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				r.done = true
				continue
			}
			var c struct {
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
				Choices []struct {
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			json.Unmarshal([]byte(data), &c)
			if c.Error != nil {
				r.errCode = c.Error.Code
			}
			if len(c.Choices) == 1 {
				r.content += c.Choices[0].Delta.Content
				r.finish += c.Choices[0].FinishReason
				if r.content != "" && !signalled {
					signalled = true
					close(first)
				}
			}
		}
		r.err = sc.Err()
		if !signalled {
			close(first)
		}
	}()
	return out
}

// TestShutdownDrains checks a graceful shutdown through Serve: new requests
// are refused with 503 (or find the listener closed), the admitted one
// finishes, and Serve returns nil.
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	s := serve(t, context.Background(), server.Config{DrainTimeout: 10 * time.Second})
	words := strings.Repeat("word ", 20)
	s.eng.say(s.f, words).slow(5 * time.Millisecond)
	first, second := make(chan struct{}), make(chan struct{})
	running := startStream(context.Background(), s.base, first)
	<-first
	queued := startStream(context.Background(), s.base, second)
	waitFor(t, 5*time.Second, "the second request to queue", func() bool {
		var h healthBody
		json.Unmarshal(s.inProcess(http.MethodGet, "/health", "").Body.Bytes(), &h)
		return h.Queue.Waiting == 1
	})
	s.srv.Shutdown()
	waitFor(t, 5*time.Second, "shutting_down in /health", func() bool {
		var h healthBody
		json.Unmarshal(s.inProcess(http.MethodGet, "/health", "").Body.Bytes(), &h)
		return h.ShuttingDown
	})
	// Refused in the handler whatever the listener does.
	w := s.inProcess(http.MethodPost, "/v1/chat/completions", endless+"}")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"service_shutting_down"`) {
		t.Errorf("in-process request during shutdown: %d %s", w.Code, w.Body)
	}
	if w := s.inProcess(http.MethodGet, "/ready", ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("/ready during shutdown: %d", w.Code)
	}
	// Over the network: the listener still answers, with 503.
	checkRefused(t, s.base, "a new request during the drain")
	// Both admitted requests finish: the running one and the queued one.
	for i, c := range []<-chan streamResult{running, queued} {
		if r := <-c; r.err != nil || !r.done || r.finish != "stop" || r.content != words {
			t.Errorf("admitted request %d: %+v", i, r)
		}
	}
	s.returned(t, 5*time.Second)
}

// checkRefused posts a new chat request on a fresh connection and
// fails unless it gets 503 service_shutting_down.
func checkRefused(t *testing.T, base, what string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(endless+"}"))
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"service_shutting_down"`) {
		t.Errorf("%s: %d %s", what, resp.StatusCode, body)
	}
}

// TestShutdownDrainDeadline checks the drain deadline: the running stream
// ends with a service_shutting_down error chunk and [DONE], the queued
// stream and the queued non-streamed request get 503
// service_shutting_down, the engine stops, Serve returns nil, and the
// listener answers 503 until Close.
func TestShutdownDrainDeadline(t *testing.T) {
	t.Parallel()
	s := serve(t, context.Background(), server.Config{DrainTimeout: 200 * time.Millisecond})
	s.eng.forever(s.f, "la ").slow(5 * time.Millisecond)
	first := make(chan struct{})
	running := startStream(context.Background(), s.base, first)
	<-first
	queued := startStream(context.Background(), s.base, make(chan struct{}))
	whole := startChat(context.Background(), s.base, endless+"}", make(chan struct{}))
	waitFor(t, 5*time.Second, "two requests to queue", func() bool {
		var h healthBody
		json.Unmarshal(s.inProcess(http.MethodGet, "/health", "").Body.Bytes(), &h)
		return h.Queue.Waiting == 2
	})
	s.srv.Shutdown()
	s.returned(t, 5*time.Second)
	if r := <-running; r.err != nil || !r.done || r.errCode != "service_shutting_down" || r.finish != "" || r.content == "" {
		t.Errorf("the running stream: %+v", r)
	}
	if r := <-queued; r.status != http.StatusServiceUnavailable || r.errCode != "service_shutting_down" {
		t.Errorf("the queued stream: %+v", r)
	}
	if r := <-whole; r.status != http.StatusServiceUnavailable || r.errCode != "service_shutting_down" {
		t.Errorf("the queued request: %+v", r)
	}
	n := s.eng.decodes.Load()
	time.Sleep(50 * time.Millisecond)
	if m := s.eng.decodes.Load(); m > n {
		t.Errorf("the engine went on after Serve returned: %d more steps", m-n)
	}
	checkRefused(t, s.base, "a new request after Serve returned")
}

// TestShutdownDrainDeadlineWhole checks a non-streamed request running at
// the drain deadline: 503 service_shutting_down.
func TestShutdownDrainDeadlineWhole(t *testing.T) {
	t.Parallel()
	s := serve(t, context.Background(), server.Config{DrainTimeout: 100 * time.Millisecond})
	s.eng.forever(s.f, "la ").slow(5 * time.Millisecond)
	whole := startChat(context.Background(), s.base, endless+"}", make(chan struct{}))
	waitFor(t, 5*time.Second, "the request to run", func() bool { return s.eng.decodes.Load() > 2 })
	s.srv.Shutdown()
	s.returned(t, 5*time.Second)
	if r := <-whole; r.status != http.StatusServiceUnavailable || r.errCode != "service_shutting_down" {
		t.Errorf("the running request: %+v", r)
	}
}

// TestShutdownByContext checks the signal path: Serve's context ends.
func TestShutdownByContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := serve(t, ctx, server.Config{})
	resp, err := http.Get(s.base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/ready %d", resp.StatusCode)
	}
	cancel()
	s.returned(t, 5*time.Second)
}

// TestShutdownEndpoint checks POST /shutdown: off unless enabled.
func TestShutdownEndpoint(t *testing.T) {
	t.Parallel()
	off := serve(t, context.Background(), server.Config{})
	resp, err := http.Post(off.base+"/shutdown", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /shutdown when not enabled: %d", resp.StatusCode)
	}

	on := serve(t, context.Background(), server.Config{EnableShutdown: true, APIKey: "k"})
	resp, err = http.Post(on.base+"/shutdown", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /shutdown without the key: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, on.base+"/shutdown", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "shutting_down") {
		t.Errorf("POST /shutdown: %d %s", resp.StatusCode, body)
	}
	on.returned(t, 5*time.Second)
}

// TestShutdownDrainDeadlineResponses checks a Responses stream running at
// the drain deadline: it ends with response.failed, code
// service_shutting_down.
func TestShutdownDrainDeadlineResponses(t *testing.T) {
	t.Parallel()
	s := serve(t, context.Background(), server.Config{DrainTimeout: 100 * time.Millisecond})
	s.eng.forever(s.f, "la ").slow(5 * time.Millisecond)
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(s.base+"/v1/responses", "application/json",
			strings.NewReader(`{"model":"`+modelID+`","input":"talk","reasoning":{"effort":"none"},"stream":true}`))
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		last := ""
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				last = data
			}
		}
		done <- last
	}()
	waitFor(t, 5*time.Second, "the request to run", func() bool { return s.eng.decodes.Load() > 2 })
	s.srv.Shutdown()
	s.returned(t, 5*time.Second)
	var ev struct {
		Type     string `json:"type"`
		Response struct {
			Status string `json:"status"`
			Error  struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"response"`
	}
	last := <-done
	if err := json.Unmarshal([]byte(last), &ev); err != nil || ev.Type != "response.failed" || ev.Response.Status != "failed" || ev.Response.Error.Code != "service_shutting_down" {
		t.Errorf("the stream's last event: %s", last)
	}
}
