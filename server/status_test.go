package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"

	"github.com/aimaproject/aimac/server"
)

// TestTokenize checks /tokenize and /detokenize against the tokenizer and
// against what a chat request prefills.
func TestTokenize(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	type tokens struct {
		Tokens      []int32 `json:"tokens"`
		Count       int     `json:"count"`
		MaxModelLen int     `json:"max_model_len"`
	}
	text := "Hello wörld <tool_call> 😀"
	got := decode[tokens](t, h.do(t, http.MethodPost, "/tokenize", map[string]any{"prompt": text}))
	want := tokens{Tokens: h.f.tok.Encode(text), Count: len(h.f.tok.Encode(text)), MaxModelLen: 4096}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prompt (-want +got):\n%s", diff)
	}
	type detok struct {
		Prompt string `json:"prompt"`
	}
	back := decode[detok](t, h.do(t, http.MethodPost, "/detokenize", map[string]any{"tokens": got.Tokens, "model": modelID}))
	if back.Prompt != text {
		t.Errorf("detokenize %q, want %q", back.Prompt, text)
	}

	// Messages with tools count what a chat request with them prefills.
	msgs := []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}}
	chat := decode[tokens](t, h.do(t, http.MethodPost, "/tokenize", map[string]any{"messages": msgs, "tools": []any{weatherToolJSON}}))
	h.eng.say(h.f, "ok")
	res := decode[chatResponse](t, h.do(t, http.MethodPost, "/v1/chat/completions",
		map[string]any{"model": modelID, "messages": msgs, "tools": []any{weatherToolJSON}}))
	if chat.Count != res.Usage.PromptTokens || chat.Count != len(chat.Tokens) {
		t.Errorf("tokenize counts %d (%d ids), the chat request prefilled %d", chat.Count, len(chat.Tokens), res.Usage.PromptTokens)
	}
	prefilled := h.eng.lastIDs(t)
	if diff := cmp.Diff(prefilled, chat.Tokens); diff != "" {
		t.Errorf("tokenize ids differ from the prefilled prompt (-prefilled +tokenize):\n%s", diff)
	}
	// Without the generation prompt the assistant opening is left out.
	bare := decode[tokens](t, h.do(t, http.MethodPost, "/tokenize", map[string]any{"messages": msgs, "add_generation_prompt": false}))
	text, _ = h.f.tok.Decode(bare.Tokens, false)
	if !strings.HasSuffix(text, "Weather?<|im_end|>\n") {
		t.Errorf("without the generation prompt: %q", text)
	}

	for _, tc := range []struct {
		path, body string
		want       errorReply
	}{
		{"/tokenize", `{"prompt":"a","messages":[{"role":"user","content":"b"}]}`, errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "messages"}},
		{"/tokenize", `{}`, errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "messages"}},
		{"/tokenize", `{"prompt":"a","model":"other"}`, errorReply{Status: 404, Code: "model_not_found", Type: "invalid_request_error", Param: "model"}},
		{"/tokenize", `{"prompt":"a","extra":1}`, errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "extra"}},
		{"/detokenize", `{"tokens":[99999999]}`, errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "tokens"}},
		{"/detokenize", `{}`, errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "tokens"}},
	} {
		r := h.do(t, http.MethodPost, tc.path, tc.body)
		if diff := cmp.Diff(tc.want, errorOf(r, "")); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.path, tc.body, diff)
		}
	}
}

// TestModels checks /v1/models and /v1/models/{id} through the client: the
// real context length, and an id with a slash.
func TestModels(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	list, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 1 || list.Data[0].ID != modelID || list.Data[0].OwnedBy == "" || list.Data[0].Object != "model" {
		t.Fatalf("models %s", list.RawJSON())
	}
	if got := list.Data[0].JSON.ExtraFields["max_model_len"].Raw(); got != "4096" {
		t.Errorf("max_model_len %s", got)
	}
	m, err := c.Models.Get(ctx, modelID)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != modelID || m.JSON.ExtraFields["max_model_len"].Raw() != "4096" {
		t.Errorf("model %s", m.RawJSON())
	}
	// Unescaped, as curl sends it.
	if r := h.do(t, http.MethodGet, "/v1/models/"+modelID, nil); r.status != http.StatusOK {
		t.Errorf("GET /v1/models/%s: %d %s", modelID, r.status, r.body)
	}
	var apiErr *oai.Error
	if _, err := c.Models.Get(ctx, "gpt-4o"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Errorf("unknown model: %v", err)
	}
}

// TestReadiness checks /ready and /health before and after SetModel, and
// that requests before it are refused with 503.
func TestReadiness(t *testing.T) {
	t.Parallel()
	f := tiny(t)
	srv := server.New(server.Config{})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	h := &harness{f: f, srv: srv, ts: ts}
	if r := h.do(t, http.MethodGet, "/ready", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("/ready before the model: %d", r.status)
	}
	if got := h.health(t); got.Status != "loading" || got.Ready {
		t.Errorf("/health before the model: %+v", got)
	}
	if r := h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", nil)); r.status != http.StatusServiceUnavailable {
		t.Errorf("chat before the model: %d %s", r.status, r.body)
	}
	if r := h.do(t, http.MethodGet, "/v1/models", nil); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Errorf("models before the model: %d %s", r.status, r.body)
	}
	srv.SetModel(f.model(newScripted(f)))
	if r := h.do(t, http.MethodGet, "/ready", nil); r.status != http.StatusOK {
		t.Errorf("/ready after the model: %d", r.status)
	}
	want := healthBody{Status: "ok", Ready: true, Model: modelID, ContextTokens: 4096, Queue: queueBody{Depth: 16}}
	if diff := cmp.Diff(want, h.health(t)); diff != "" {
		t.Errorf("/health (-want +got):\n%s", diff)
	}
}

// TestRequestID checks that x-request-id is echoed, or made up.
func TestRequestID(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "ok")
	for _, path := range []string{"/health", "/v1/models", "/nowhere"} {
		if got := h.do(t, http.MethodGet, path, nil, "X-Request-Id", "abc-123").header.Get("X-Request-Id"); got != "abc-123" {
			t.Errorf("%s echoed %q", path, got)
		}
		if got := h.do(t, http.MethodGet, path, nil).header.Get("X-Request-Id"); !strings.HasPrefix(got, "req_") {
			t.Errorf("%s made up %q", path, got)
		}
	}
	// Streams carry it too.
	r := h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", map[string]any{"stream": true}), "X-Request-Id", "stream-1")
	if got := r.header.Get("X-Request-Id"); got != "stream-1" {
		t.Errorf("stream echoed %q", got)
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPanicIs500 checks that an engine fault becomes a logged 500 with the
// request id, counted in the metrics, and that the server goes on.
func TestPanicIs500(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := start(t, server.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	h.eng.say(h.f, "one two three four five")
	h.eng.mu.Lock()
	h.eng.panicAt = 2
	h.eng.mu.Unlock()
	r := h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", nil), "X-Request-Id", "boom-1")
	if r.status != http.StatusInternalServerError || r.errorCode() != "internal_error" {
		t.Errorf("status %d %s", r.status, r.body)
	}
	if !strings.Contains(logs.String(), "panic") || !strings.Contains(logs.String(), "request_id=boom-1") {
		t.Errorf("the panic was not logged with the request id:\n%s", logs.String())
	}
	if got := scrape(t, h)["aima_requests_total"][`endpoint="/v1/chat/completions",status="500"`]; got != 1 {
		t.Errorf("500s counted %v", got)
	}
	// A fault after the stream began ends the stream with an error chunk.
	evs := h.stream(t, "/v1/chat/completions", userChat("hi", map[string]any{"stream": true}))
	if last := evs[len(evs)-1].data; !strings.Contains(last, `"internal_error"`) {
		t.Errorf("the stream ended with %s", last)
	}
	if got := scrape(t, h)["aima_requests_total"][`endpoint="/v1/chat/completions",status="500"`]; got != 2 {
		t.Errorf("500s counted %v, want 2", got)
	}
	// The queue was released: the next request runs.
	h.eng.mu.Lock()
	h.eng.panicAt = 0
	h.eng.mu.Unlock()
	if r := h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", nil)); r.status != http.StatusOK {
		t.Errorf("after the panic: %d %s", r.status, r.body)
	}
}

// scrape reads /metrics into name → labels → value.
func scrape(t testing.TB, h *harness) map[string]map[string]float64 {
	t.Helper()
	r := h.do(t, http.MethodGet, "/metrics", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		name, labels := line[:i], ""
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name, labels = line[:j], strings.TrimSuffix(line[j+1:i], "}")
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][labels] = v
	}
	return out
}

// TestMetrics checks that the counters add up to the requests made.
func TestMetrics(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "Thinking.\n</think>\n\nDone here.")
	var prompt, completion int
	for range 3 {
		res := decode[chatResponse](t, h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", nil)))
		prompt += res.Usage.PromptTokens
		completion += res.Usage.CompletionTokens
	}
	h.stream(t, "/v1/chat/completions", userChat("hi", map[string]any{"stream": true}))
	h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", map[string]any{"model": "nope"}))
	h.do(t, http.MethodPost, "/v1/chat/completions", `{`)
	h.do(t, http.MethodGet, "/health", nil)
	h.do(t, http.MethodGet, "/nowhere", nil)
	m := scrape(t, h)
	want := map[string]float64{
		`endpoint="/v1/chat/completions",status="200"`: 4,
		`endpoint="/v1/chat/completions",status="404"`: 1,
		`endpoint="/v1/chat/completions",status="400"`: 1,
		`endpoint="/health",status="200"`:              1,
		`endpoint="unmatched",status="404"`:            1,
	}
	if diff := cmp.Diff(want, m["aima_requests_total"]); diff != "" {
		t.Errorf("aima_requests_total (-want +got):\n%s", diff)
	}
	// The streamed request generated what each non-streamed one did.
	if got := m["aima_prompt_tokens_total"][""]; got != float64(prompt*4/3) {
		t.Errorf("prompt tokens %v, want %d", got, prompt*4/3)
	}
	if got := m["aima_completion_tokens_total"][""]; got != float64(completion*4/3) {
		t.Errorf("completion tokens %v, want %d", got, completion*4/3)
	}
	if got := m["aima_ttft_seconds_count"][""]; got != 4 {
		t.Errorf("TTFT observations %v, want 4", got)
	}
	if got := m["aima_queue_wait_seconds_count"][""]; got != 4 {
		t.Errorf("queue wait observations %v, want 4", got)
	}
	if got := m["aima_queue_depth"][""]; got != 0 {
		t.Errorf("queue depth %v", got)
	}
}

// TestTTFTCountsQueueWait checks that time to first token counts from the
// request's arrival: a request queued behind a 100 ms one waits that long.
func TestTTFTCountsQueueWait(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, strings.Repeat("la ", 10)).slow(10 * time.Millisecond)
	first := make(chan struct{})
	go func() {
		defer close(first)
		h.do(t, http.MethodPost, "/v1/chat/completions", userChat("one", map[string]any{"reasoning_effort": "none"}))
	}()
	waitFor(t, 5*time.Second, "the first request to run", func() bool { return h.health(t).Queue.Running == 1 })
	h.do(t, http.MethodPost, "/v1/chat/completions", userChat("two", map[string]any{"reasoning_effort": "none"}))
	<-first
	m := scrape(t, h)
	if n, sum := m["aima_ttft_seconds_count"][""], m["aima_ttft_seconds_sum"][""]; n != 2 || sum < 0.05 {
		t.Errorf("TTFT: %v observations summing to %vs; the queued request waited about 0.1s", n, sum)
	}
}
