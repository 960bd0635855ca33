package server_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/server"
)

// TestOverload sends many more concurrent clients than the queue holds to
// a slow engine: each gets 200 or a real 429 (with Retry-After) or 503,
// nothing else; the server stays healthy and counts every request.
func TestOverload(t *testing.T) {
	t.Parallel()
	const clients, depth = 40, 4
	h := start(t, server.Config{QueueDepth: depth, QueueTimeout: 5 * time.Second})
	h.eng.say(h.f, "one two three").slow(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range clients {
		wg.Go(func() {
			<-start
			body := endless + `,"max_tokens":20}`
			if i%2 == 1 {
				body = endless + `,"max_tokens":20,"stream":true}`
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.ts.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				t.Errorf("client %d: %v", i, err)
				return
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Errorf("client %d: reading: %v", i, err)
			}
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Errorf("client %d: 429 without Retry-After", i)
			}
			if resp.StatusCode == http.StatusOK && i%2 == 1 && !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
				t.Errorf("client %d: stream cut short: %q", i, data[max(0, len(data)-100):])
			}
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for code, n := range statuses {
		switch code {
		case http.StatusOK, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Errorf("%d responses with status %d", n, code)
		}
	}
	if statuses[http.StatusOK] == 0 || statuses[http.StatusTooManyRequests] == 0 {
		t.Errorf("statuses %v: want some served and some refused", statuses)
	}
	t.Logf("statuses %v", statuses)

	if got := h.health(t); got.Status != "ok" || got.Queue.Waiting != 0 || got.Queue.Running != 0 {
		t.Errorf("health after the burst: %+v", got)
	}
	h.works(t)
	counted := map[int]int{}
	for labels, v := range scrape(t, h)["aima_requests_total"] {
		endpoint, status, _ := strings.Cut(labels, ",")
		if endpoint == `endpoint="/v1/chat/completions"` {
			code, err := strconv.Atoi(strings.Trim(strings.TrimPrefix(status, "status="), `"`))
			if err != nil {
				t.Fatalf("labels %s", labels)
			}
			counted[code] += int(v)
		}
	}
	statuses[http.StatusOK]++ // the fresh request
	if diff := cmp.Diff(statuses, counted); diff != "" {
		t.Errorf("aima_requests_total by status (-sent +counted):\n%s", diff)
	}
	q := h.health(t).Queue
	if q.Admitted+q.Rejected != clients+1 {
		t.Errorf("queue admitted %d + rejected %d, want %d", q.Admitted, q.Rejected, clients+1)
	}
}
