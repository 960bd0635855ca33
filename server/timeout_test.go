package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/server"
)

// TestRequestTimeout checks the end-to-end deadline: 504 before any
// header, an error chunk then [DONE] on a chat or completions stream, and
// response.failed on a Responses stream.
func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{RequestTimeout: 100 * time.Millisecond})
	h.eng.forever(h.f, "la ").slow(5 * time.Millisecond)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", endless + "}"},
		{"/v1/completions", `{"model":"test/tiny","prompt":"x","max_tokens":2000}`},
		{"/v1/responses", `{"model":"test/tiny","input":"x"}`},
	} {
		r := h.do(t, http.MethodPost, tc.path, tc.body)
		if diff := cmp.Diff(errorReply{Status: 504, Code: "request_timeout", Type: "server_error"}, errorOf(r, "")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.path, diff)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", endless + `,"stream":true}`},
		{"/v1/completions", `{"model":"test/tiny","prompt":"x","max_tokens":2000,"stream":true}`},
	} {
		evs := h.stream(t, tc.path, tc.body)
		last := evs[len(evs)-1].data
		if !strings.HasPrefix(last, `{"error":`) || !strings.Contains(last, `"request_timeout"`) {
			t.Errorf("%s: the stream ended with %s", tc.path, last)
		}
	}
	evs := h.stream(t, "/v1/responses", `{"model":"test/tiny","input":"x","stream":true}`)
	last := evs[len(evs)-1]
	var e struct {
		Response struct {
			Status string `json:"status"`
			Error  struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"response"`
	}
	json.Unmarshal([]byte(last.data), &e)
	if last.name != "response.failed" || e.Response.Status != "failed" || e.Response.Error.Code != "request_timeout" {
		t.Errorf("the Responses stream ended with %s %s", last.name, last.data)
	}
	h.idle(t)
}

// TestQueueTimeout checks that a request that waits too long in the queue
// gets 503 queue_timeout.
func TestQueueTimeout(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{QueueTimeout: 100 * time.Millisecond})
	h.eng.forever(h.f, "la ").slow(5 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := h.post(ctx, t, "/v1/chat/completions", endless+"}"); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 5*time.Second, "the first request to run", func() bool { return h.health(t).Queue.Running == 1 })
	for _, stream := range []string{"}", `,"stream":true}`} {
		r := h.do(t, http.MethodPost, "/v1/chat/completions", endless+stream)
		if diff := cmp.Diff(errorReply{Status: 503, Code: "queue_timeout", Type: "server_error"}, errorOf(r, "")); diff != "" {
			t.Errorf("stream%s (-want +got):\n%s", stream, diff)
		}
	}
	if q := h.health(t).Queue; q.TimedOut != 2 {
		t.Errorf("queue timed_out %d, want 2", q.TimedOut)
	}
	cancel()
	<-done
	h.idle(t)
}
