package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/server"
)

// cacheServer serves the tiny model on the CPU engine with a prefix cache.
func cacheServer(t *testing.T, entries int, bytes int64) (*httptest.Server, *server.Server) {
	t.Helper()
	ts, srv, _ := cacheServerOn(t, entries, bytes, 0)
	return ts, srv
}

// cacheServerOn is cacheServer with device bytes for the engine's snapshot
// tier (the CPU backend's copies stand in for device memory).
func cacheServerOn(t *testing.T, entries int, bytes, device int64) (*httptest.Server, *server.Server, *runtime.Engine) {
	t.Helper()
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Engine.SetSnapshotDeviceBytes(device); err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{PrefixCacheEntries: entries, PrefixCacheBytes: bytes})
	srv.SetModel(f.model(l.Engine))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, srv, l.Engine
}

// turn is what a greedy chat request answered.
type turn struct {
	Content, Reasoning string
	Prompt, Cached     int
}

func chatTurn(t *testing.T, ts *httptest.Server, messages []map[string]string, cache bool) turn {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": modelID, "messages": messages, "max_tokens": 12,
		"temperature": 0, "cache_prompt": cache})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	m := out.Choices[0].Message
	return turn{m.Content, m.ReasoningContent, out.Usage.PromptTokens, out.Usage.PromptTokensDetails.CachedTokens}
}

func user(text string) map[string]string { return map[string]string{"role": "user", "content": text} }
func assistant(text string) map[string]string {
	return map[string]string{"role": "assistant", "content": text}
}

// answerOnly compares answers, not cache accounting.
func answerOnly(t turn) turn { t.Cached = 0; return t }

// TestPrefixCacheHits: an exact repeat restores the whole prompt, a second
// chat turn restores up to the first turn's boundary (the template drops
// old reasoning, the cache still hits), and every hit answers exactly as a
// cold run does.
func TestPrefixCacheHits(t *testing.T) {
	ts, _ := cacheServer(t, 8, 64<<20)
	first := []map[string]string{user("Tell me about the weather in Paris today.")}
	cold := chatTurn(t, ts, first, false)
	if cold.Cached != 0 {
		t.Fatalf("cold request reports %d cached tokens", cold.Cached)
	}
	fill := chatTurn(t, ts, first, true)
	if diff := cmp.Diff(answerOnly(cold), answerOnly(fill)); diff != "" {
		t.Errorf("first cached run differs from cold (-cold +cached):\n%s", diff)
	}
	exact := chatTurn(t, ts, first, true)
	if exact.Cached != exact.Prompt {
		t.Errorf("exact repeat: %d of %d prompt tokens cached, want all", exact.Cached, exact.Prompt)
	}
	if diff := cmp.Diff(answerOnly(cold), answerOnly(exact)); diff != "" {
		t.Errorf("exact hit differs from cold (-cold +hit):\n%s", diff)
	}

	second := append(append([]map[string]string{}, first...), assistant(cold.Content+"Sunny."), user("And tomorrow?"))
	want := chatTurn(t, ts, second, false)
	got := chatTurn(t, ts, second, true)
	if got.Cached == 0 || got.Cached >= got.Prompt {
		t.Errorf("second turn: %d of %d prompt tokens cached, want the first turn's prefix", got.Cached, got.Prompt)
	}
	if diff := cmp.Diff(answerOnly(want), answerOnly(got)); diff != "" {
		t.Errorf("second turn with the cache differs from cold (-cold +cached):\n%s", diff)
	}
}

// TestPrefixCacheConversationsIsolated interleaves two conversations: each
// hit restores its own state.
func TestPrefixCacheConversationsIsolated(t *testing.T) {
	ts, _ := cacheServer(t, 8, 64<<20)
	a := []map[string]string{user("First conversation: count to three.")}
	b := []map[string]string{user("Second conversation: name a color.")}
	wantA, wantB := chatTurn(t, ts, a, false), chatTurn(t, ts, b, false)
	for round := 0; round < 2; round++ {
		gotA, gotB := chatTurn(t, ts, a, true), chatTurn(t, ts, b, true)
		if diff := cmp.Diff(answerOnly(wantA), answerOnly(gotA)); diff != "" {
			t.Errorf("round %d conversation a (-cold +cached):\n%s", round, diff)
		}
		if diff := cmp.Diff(answerOnly(wantB), answerOnly(gotB)); diff != "" {
			t.Errorf("round %d conversation b (-cold +cached):\n%s", round, diff)
		}
		a = append(a, assistant(gotA.Content), user("Go on."))
		b = append(b, assistant(gotB.Content), user("Another."))
		wantA, wantB = chatTurn(t, ts, a, false), chatTurn(t, ts, b, false)
	}
}

// TestPrefixCacheUntouchedByCancelledRequest: a request cancelled while it
// runs adds nothing to the cache and changes no entry.
func TestPrefixCacheUntouchedByCancelledRequest(t *testing.T) {
	ts, _ := cacheServer(t, 8, 64<<20)
	conv := []map[string]string{user("A question that is answered at length.")}
	want := chatTurn(t, ts, conv, false)
	before := metric(t, ts, "aima_prefix_cache_entries")

	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"model": modelID, "stream": true, "max_tokens": 400, "temperature": 0,
		"messages": []map[string]string{user("Another question, abandoned midway.")}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Past the role chunk, two token chunks: the prompt is prefilled and
	// decoding has begun.
	rd := bufio.NewReader(resp.Body)
	for chunks := 0; chunks < 3; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			chunks++
		}
	}
	cancel()
	resp.Body.Close()

	waitFor(t, 5e9, "the cancelled request to leave", func() bool {
		return metric(t, ts, "aima_queue_running") == 0
	})
	if after := metric(t, ts, "aima_prefix_cache_entries"); after != before {
		t.Errorf("cache entries went from %v to %v after a cancelled request", before, after)
	}
	if got := chatTurn(t, ts, conv, true); !cmp.Equal(answerOnly(want), answerOnly(got)) {
		t.Errorf("after the cancelled request: %+v, want %+v", got, want)
	}
	if hits := metric(t, ts, "aima_prefix_cache_hits_total"); hits < 0 {
		t.Errorf("hits %v", hits)
	}
}

// TestPrefixCacheDeviceTier: with snapshots in device memory the cached
// answers are the cold ones, the cache's device bytes are exactly what the
// engine's tier holds (a cancelled request's snapshots are given back, none
// leaks), and moving every snapshot to the host changes no answer.
func TestPrefixCacheDeviceTier(t *testing.T) {
	ts, _, e := cacheServerOn(t, 8, 64<<20, 64<<20)
	conv := []map[string]string{user("First conversation: count to three.")}
	want := chatTurn(t, ts, conv, false)
	for round := 0; round < 2; round++ {
		if got := chatTurn(t, ts, conv, true); !cmp.Equal(answerOnly(want), answerOnly(got)) {
			t.Errorf("round %d: %+v, want %+v", round, got, want)
		}
	}
	held := func(what string) {
		t.Helper()
		used, _ := e.SnapshotDevice()
		if got := metric(t, ts, "aima_prefix_cache_device_bytes"); got != float64(used) {
			t.Errorf("%s: the cache reports %v device bytes, the engine's tier holds %d", what, got, used)
		}
	}
	if used, _ := e.SnapshotDevice(); used == 0 {
		t.Fatal("no snapshot went to the device tier")
	}
	held("after the cached turns")

	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(map[string]any{"model": modelID, "stream": true, "max_tokens": 400, "temperature": 0,
		"messages": []map[string]string{user("Another question, abandoned midway.")}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for chunks := 0; chunks < 3; {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended early: %v", err)
		}
		if strings.HasPrefix(line, "data: ") {
			chunks++
		}
	}
	cancel()
	resp.Body.Close()
	waitFor(t, 5e9, "the cancelled request to leave", func() bool {
		return metric(t, ts, "aima_queue_running") == 0
	})
	held("after a cancelled request")

	if err := e.SetSnapshotDeviceBytes(0); err != nil {
		t.Fatal(err)
	}
	held("with every snapshot on the host")
	if got := chatTurn(t, ts, conv, true); !cmp.Equal(answerOnly(want), answerOnly(got)) {
		t.Errorf("from the host tier: %+v, want %+v", got, want)
	}
}

// metric reads one unlabelled series from /metrics.
func metric(t *testing.T, ts *httptest.Server, name string) float64 {
	t.Helper()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		var v float64
		if strings.HasPrefix(line, name+" ") {
			fmt.Sscan(strings.TrimPrefix(line, name+" "), &v)
			return v
		}
	}
	t.Fatalf("no series %s in /metrics", name)
	return 0
}

// completion is a greedy /v1/completions answer to token ids.
type completion struct {
	Text           string
	Prompt, Cached int
}

func complete(t *testing.T, ts *httptest.Server, ids []int32, maxTokens int, cache bool) completion {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": modelID, "prompt": ids, "max_tokens": maxTokens,
		"temperature": 0, "cache_prompt": cache})
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return completion{out.Choices[0].Text, out.Usage.PromptTokens, out.Usage.PromptTokensDetails.CachedTokens}
}

// TestExactPrefixHitTiers: an exact repeat restores from the device tier
// and adopts the KV rows the engine still holds (only the states are
// copied); after another request has rewritten the KV cache the same hit
// copies its rows; from the host tier it uploads them. Every answer is the
// cold one, and the TTFT parts are exported.
func TestExactPrefixHitTiers(t *testing.T) {
	ts, _, e := cacheServerOn(t, 8, 64<<20, 64<<20)
	f := tiny(t)
	ids := f.tok.Encode("An exact repeat of a long prompt should cost its restore and one draw, nothing more.")
	cold := complete(t, ts, ids, 6, false)
	var kv, state int64
	for _, b := range e.Plan().Buffers {
		switch b.Role {
		case "kv":
			kv += int64(len(ids)) * (b.Bytes / b.Shape[0])
		case "state":
			state += b.Bytes
		}
	}
	counter := func(series string) float64 { t.Helper(); return metric(t, ts, series) }
	step := func(what string, wantTier string, copied, adopted int64) {
		t.Helper()
		before := map[string]float64{}
		for _, s := range []string{"copied_device", "copied_host", "adopted"} {
			before[s] = counter(`aima_prefix_cache_restored_bytes_total{how="` + s + `"}`)
		}
		restores := counter(`aima_prefix_cache_restores_total{tier="` + wantTier + `"}`)
		got := complete(t, ts, ids, 6, true)
		if diff := cmp.Diff(completion{cold.Text, len(ids), len(ids)}, got); diff != "" {
			t.Errorf("%s (-cold +hit):\n%s", what, diff)
		}
		if n := counter(`aima_prefix_cache_restores_total{tier="` + wantTier + `"}`); n != restores+1 {
			t.Errorf("%s: %v restores from the %s tier, want %v", what, n, wantTier, restores+1)
		}
		want := map[string]int64{"copied_" + wantTier: copied, "adopted": adopted}
		for s, b := range before {
			if d := counter(`aima_prefix_cache_restored_bytes_total{how="`+s+`"}`) - b; d != float64(want[s]) {
				t.Errorf("%s: %s grew by %v bytes, want %d", what, s, d, want[s])
			}
		}
	}
	// The first cached request prefills and snapshots; the engine then
	// decodes past the prompt, which leaves the prompt's rows alone.
	if fill := complete(t, ts, ids, 6, true); fill.Text != cold.Text || fill.Cached != 0 {
		t.Fatalf("filling request %+v, want %q uncached", fill, cold.Text)
	}
	if used, _ := e.SnapshotDevice(); used == 0 {
		t.Fatal("the snapshot is not in the device tier")
	}
	step("exact repeat", "device", state, kv)
	step("exact repeat again", "device", state, kv)
	complete(t, ts, f.tok.Encode("Another prompt in between rewrites the KV cache."), 4, false)
	step("after another request", "device", state+kv, 0)
	if err := e.SetSnapshotDeviceBytes(0); err != nil {
		t.Fatal(err)
	}
	complete(t, ts, f.tok.Encode("Another prompt in between rewrites the KV cache."), 4, false)
	step("from the host tier", "host", state+kv, 0)
	step("from the host tier, repeated", "host", state, kv)

	for _, part := range []string{"read", "prepare", "queue", "restore", "prefill", "snapshot", "first"} {
		if n := counter(`aima_ttft_part_seconds_count{part="` + part + `"}`); n < 1 {
			t.Errorf("TTFT part %s counted %v times", part, n)
		}
	}
}

// callLog is the real CPU engine recording the calls that change or read
// its state, in order, host or device sampled (host set: no device
// sampler).
type callLog struct {
	*runtime.Engine
	host  bool
	calls []string
	// failPrefill fails the prefill of that many calls from now (0: none).
	failPrefill int
}

func (e *callLog) CanSample() bool { return !e.host && e.Engine.CanSample() }

func (e *callLog) Prefill(ctx context.Context, tokens []int32, rows runtime.RowsFunc) ([]float32, error) {
	e.calls = append(e.calls, "prefill")
	if e.failPrefill--; e.failPrefill == 0 {
		return nil, errors.New("prefill failed on purpose")
	}
	return e.Engine.Prefill(ctx, tokens, rows)
}

func (e *callLog) Snapshot(logits []float32) (*runtime.Snapshot, error) {
	e.calls = append(e.calls, "snapshot")
	return e.Engine.Snapshot(logits)
}

func (e *callLog) SampleLogits(ctx context.Context, logits []float32, s runtime.DeviceSampling, step int) (int32, float32, error) {
	e.calls = append(e.calls, "draw")
	return e.Engine.SampleLogits(ctx, logits, s, step)
}

func (e *callLog) Decode(ctx context.Context, token int32) ([]float32, error) {
	e.calls = append(e.calls, "decode")
	return e.Engine.Decode(ctx, token)
}

func (e *callLog) DecodeSampled(ctx context.Context, token int32, s runtime.DeviceSampling, step int) (int32, float32, error) {
	e.calls = append(e.calls, "decode")
	return e.Engine.DecodeSampled(ctx, token, s, step)
}

// TestPromptEndSnapshotAfterFirstToken: a cached chat request snapshots its
// turn boundary between its two prefills and its prompt's end only after
// the first token is drawn, before the first decode step (or, for a
// one-token answer, before the commit), sampled on the device or on the
// host; a hit on that snapshot answers as the cold request did.
func TestPromptEndSnapshotAfterFirstToken(t *testing.T) {
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conv := []map[string]string{user("Where is the snapshot of the prompt's end taken?")}
	for _, host := range []bool{false, true} {
		e := &callLog{Engine: l.Engine, host: host}
		// serve starts a server with an empty cache on e.
		serve := func() *httptest.Server {
			srv := server.New(server.Config{PrefixCacheEntries: 8, PrefixCacheBytes: 64 << 20})
			srv.SetModel(f.model(e))
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(ts.Close)
			return ts
		}
		for _, n := range []int{3, 1} {
			ts := serve()
			e.calls = nil
			body, _ := json.Marshal(map[string]any{"model": modelID, "messages": conv, "max_tokens": n, "temperature": 0})
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			want := []string{"prefill", "snapshot", "prefill"}
			if !host {
				want = append(want, "draw") // the host draws from the logits the prefill returned
			}
			want = append(want, "snapshot")
			for i := 1; i < n; i++ {
				want = append(want, "decode")
			}
			if diff := cmp.Diff(want, e.calls); diff != "" {
				t.Errorf("host %v, max_tokens %d: calls (-want +got):\n%s", host, n, diff)
			}
		}
		ts := serve()
		cold := chatTurn(t, ts, conv, false)
		chatTurn(t, ts, conv, true) // fills the cache
		if got := chatTurn(t, ts, conv, true); got.Cached != got.Prompt || !cmp.Equal(answerOnly(cold), answerOnly(got)) {
			t.Errorf("host %v: the hit on the prompt end's snapshot answered %+v, cold %+v", host, got, cold)
		}
	}
}

// TestFailedTailPrefillReleasesBoundary: a request whose second prefill
// fails after its boundary snapshot was taken fails cleanly, gives that
// snapshot's device memory back and leaves the cache as it was.
func TestFailedTailPrefillReleasesBoundary(t *testing.T) {
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Engine.SetSnapshotDeviceBytes(64 << 20); err != nil {
		t.Fatal(err)
	}
	e := &callLog{Engine: l.Engine, failPrefill: 2}
	srv := server.New(server.Config{PrefixCacheEntries: 8, PrefixCacheBytes: 64 << 20})
	srv.SetModel(f.model(e))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	body, _ := json.Marshal(map[string]any{"model": modelID, "messages": []map[string]string{user("This one fails.")},
		"max_tokens": 2, "temperature": 0})
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status %d (%s), want 500", resp.StatusCode, raw)
	}
	if diff := cmp.Diff([]string{"prefill", "snapshot", "prefill"}, e.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if used, _ := l.Engine.SnapshotDevice(); used != 0 {
		t.Errorf("the failed request left %d bytes in the device tier", used)
	}
	if n := metric(t, ts, "aima_prefix_cache_entries"); n != 0 {
		t.Errorf("the failed request left %v cache entries", n)
	}
}

// TestRequestLogTTFT: a generation's request line carries its TTFT and
// parts; a hit's adds the tokens restored, the tier and the bytes copied
// and adopted. A request without a token (tokenize) logs none.
func TestRequestLogTTFT(t *testing.T) {
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var logs syncBuffer
	srv := server.New(server.Config{PrefixCacheEntries: 8, PrefixCacheBytes: 64 << 20,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	srv.SetModel(f.model(l.Engine))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	ids := f.tok.Encode("A prompt logged twice.")
	complete(t, ts, ids, 2, true)
	complete(t, ts, ids, 2, true)
	resp, err := http.Post(ts.URL+"/tokenize", "application/json", strings.NewReader(`{"model":"`+modelID+`","prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	type line struct {
		Msg  string `json:"msg"`
		Path string `json:"path"`
		TTFT map[string]any
	}
	var got []line
	for _, raw := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if l.Msg == "request" {
			got = append(got, l)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d request lines, want 3:\n%s", len(got), logs.String())
	}
	for i, l := range got[:2] {
		for _, k := range []string{"ttft_ms", "read", "prepare", "queue", "restore", "prefill", "snapshot", "first"} {
			if _, ok := l.TTFT[k].(float64); !ok {
				t.Errorf("request %d: ttft.%s missing in %v", i, k, l.TTFT)
			}
		}
	}
	if _, ok := got[0].TTFT["cached"]; ok {
		t.Errorf("the miss logs a restore: %v", got[0].TTFT)
	}
	if got[1].TTFT["cached"] != float64(len(ids)) || got[1].TTFT["tier"] != "host" || got[1].TTFT["adopted"].(float64) <= 0 {
		t.Errorf("the hit logs %v, want %d tokens cached from the host tier, its KV adopted", got[1].TTFT, len(ids))
	}
	if got[2].TTFT != nil {
		t.Errorf("tokenize logs a TTFT: %v", got[2].TTFT)
	}
}
