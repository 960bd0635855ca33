package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aimaproject/aimac/server"
)

// post starts a raw POST whose client ctx can leave.
func (h *harness) post(ctx context.Context, t testing.TB, path, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return h.ts.Client().Do(req)
}

// idle waits until no request runs or waits.
func (h *harness) idle(t testing.TB) {
	t.Helper()
	waitFor(t, 5*time.Second, "the queue to empty", func() bool {
		q := h.health(t).Queue
		return q.Running == 0 && q.Waiting == 0
	})
}

// checkStopped fails when the engine went on decoding after the client
// left at decode count left.
func (h *harness) checkStopped(t testing.TB, left int64) {
	t.Helper()
	h.idle(t)
	time.Sleep(50 * time.Millisecond) // a decode loop still running would show
	// A step or two may be in flight when the client leaves and a few more
	// may start before the server notices on a loaded machine; an endless
	// generation that did not stop would not have let the queue go idle.
	if n := h.eng.decodes.Load() - left; n > 8 {
		t.Errorf("the engine decoded %d more steps after the client left", n)
	}
}

// works checks that a fresh request is served normally.
func (h *harness) works(t testing.TB) {
	t.Helper()
	h.eng.slow(0)
	h.eng.say(h.f, "Fresh answer.")
	res := decode[chatResponse](t, h.do(t, http.MethodPost, "/v1/chat/completions",
		userChat("again", map[string]any{"reasoning_effort": "none"})))
	if c := res.Choices[0].Message.Content; c == nil || *c != "Fresh answer." || res.Choices[0].FinishReason != "stop" {
		t.Errorf("the next request: %+v", res.Choices[0])
	}
}

const endless = `{"model":"test/tiny","messages":[{"role":"user","content":"talk"}],"reasoning_effort":"none"`

// TestDisconnectStreaming checks that a streaming client that leaves
// cancels its generation.
func TestDisconnectStreaming(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.forever(h.f, "la la ").slow(10 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := h.post(ctx, t, "/v1/chat/completions", endless+`,"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for events := 0; events < 4 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	cancel()
	resp.Body.Close()
	h.checkStopped(t, h.eng.decodes.Load())
	h.works(t)
	if got := scrape(t, h)["aima_requests_total"][`endpoint="/v1/chat/completions",status="499"`]; got != 1 {
		t.Errorf("client-closed requests counted %v, want 1", got)
	}
}

// TestDisconnectNonStreaming checks the same for a client waiting for a
// whole answer.
func TestDisconnectNonStreaming(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.forever(h.f, "la la ").slow(10 * time.Millisecond)
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/responses"} {
		body := endless + "}"
		switch path {
		case "/v1/completions":
			body = `{"model":"test/tiny","prompt":"talk","max_tokens":4000}`
		case "/v1/responses":
			body = `{"model":"test/tiny","input":"talk"}`
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			resp, err := h.post(ctx, t, path, body)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		before := h.eng.decodes.Load()
		waitFor(t, 5*time.Second, "decoding to start", func() bool { return h.eng.decodes.Load() > before+3 })
		cancel()
		if err := <-done; err == nil {
			t.Errorf("%s: the request finished although its client left", path)
		}
		h.checkStopped(t, h.eng.decodes.Load())
		h.eng.forever(h.f, "la la ").slow(10 * time.Millisecond)
	}
	h.works(t)
}

// TestDisconnectWhileQueued checks that a waiting request whose client
// leaves is taken out of the queue.
func TestDisconnectWhileQueued(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.forever(h.f, "la la ").slow(10 * time.Millisecond)
	running, stopRunning := context.WithCancel(context.Background())
	defer stopRunning()
	first := make(chan error, 1)
	go func() {
		resp, err := h.post(running, t, "/v1/chat/completions", endless+"}")
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	waitFor(t, 5*time.Second, "the first request to run", func() bool { return h.health(t).Queue.Running == 1 })

	waiting, leave := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		resp, err := h.post(waiting, t, "/v1/chat/completions", endless+`,"stream":true}`)
		if err == nil {
			resp.Body.Close()
		}
		second <- err
	}()
	waitFor(t, 5*time.Second, "the second request to wait", func() bool { return h.health(t).Queue.Waiting == 1 })
	prefills := h.eng.prefills.Load()
	leave()
	if err := <-second; err == nil {
		t.Error("the queued request finished although its client left")
	}
	waitFor(t, 5*time.Second, "the queue to drop the request", func() bool {
		q := h.health(t).Queue
		return q.Waiting == 0 && q.Cancelled == 1 && q.Running == 1
	})
	stopRunning()
	<-first
	h.checkStopped(t, h.eng.decodes.Load())
	if n := h.eng.prefills.Load(); n != prefills {
		t.Errorf("the request that left the queue was prefilled")
	}
	h.works(t)
}
