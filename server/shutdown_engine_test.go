package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/server"
)

// shutdownMoment is when a shutdown comes, relative to the work in hand.
type shutdownMoment struct {
	name string
	// drain is the drain deadline; tokens the answers' length; words the
	// prompt's.
	drain         time.Duration
	tokens, words int
	// when returns once the moment has come.
	when func(t *testing.T, h func() healthBody, first <-chan struct{})
}

var shutdownMoments = []shutdownMoment{
	{"queued work", 100 * time.Millisecond, 150, 6, func(*testing.T, func() healthBody, <-chan struct{}) {}},
	{"prefill", 100 * time.Millisecond, 150, 40, func(t *testing.T, h func() healthBody, first <-chan struct{}) {
		select {
		case <-first:
			t.Log("the first answer had begun: the shutdown comes in a decode")
		default:
		}
	}},
	{"decode", 100 * time.Millisecond, 150, 6, func(t *testing.T, _ func() healthBody, first <-chan struct{}) { <-first }},
	{"drain deadline in a decode", 300 * time.Millisecond, 150, 6, func(t *testing.T, _ func() healthBody, first <-chan struct{}) { <-first }},
	{"everything finishes", 30 * time.Second, 4, 6, func(t *testing.T, _ func() healthBody, first <-chan struct{}) { <-first }},
}

// TestShutdownOnTheCPUEngine shuts a server of the real CPU engine down
// 20 times, at every moment of its work — queued requests, a prefill, a
// decode, the drain deadline passing in a step, all work finishing — then
// frees the engine as the serve command does once Serve has returned. The
// process must not fault (the weights are unmapped by then), and every one
// of the eight streams must end properly: complete, or with a
// service_shutting_down error chunk and [DONE], or refused with 503.
func TestShutdownOnTheCPUEngine(t *testing.T) {
	t.Parallel()
	f := tiny(t)
	for i := range 20 {
		m := shutdownMoments[i%len(shutdownMoments)]
		t.Run(fmt.Sprintf("%d %s", i, m.name), func(t *testing.T) {
			l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
			if err != nil {
				t.Fatal(err)
			}
			srv := server.New(server.Config{DrainTimeout: m.drain})
			srv.SetModel(f.model(l.Engine))
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			base := "http://" + ln.Addr().String()
			ctx, stop := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()

			body, _ := json.Marshal(map[string]any{"model": modelID, "stream": true, "max_tokens": m.tokens, "temperature": 1, "seed": i, "reasoning_effort": "none",
				"messages": []map[string]any{{"role": "user", "content": strings.Repeat("a question about everything ", m.words)}}})
			first := make(chan struct{})
			var results []<-chan streamResult
			for j := range 8 {
				signal := make(chan struct{})
				if j == 0 {
					signal = first
				}
				results = append(results, startChat(context.Background(), base, string(body), signal))
			}
			// All eight admitted, one running: none is still on its way.
			waitFor(t, 10*time.Second, "the requests to be admitted", func() bool {
				q := health(t, base).Queue
				return q.Running+q.Waiting == 8 || q.Admitted == 8
			})
			m.when(t, func() healthBody { return health(t, base) }, first)
			stop() // SIGTERM
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve returned %v", err)
				}
			case <-time.After(m.drain + 10*time.Second):
				t.Fatal("Serve did not return")
			}
			// As the serve command does: free the engine, then stop the listener.
			if err := l.Close(); err != nil {
				t.Errorf("closing the engine: %v", err)
			}
			if err := srv.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			for j, c := range results {
				r := <-c
				switch {
				case r.err != nil:
					t.Errorf("request %d: %v", j, r.err)
				case r.status == http.StatusServiceUnavailable && r.errCode == "service_shutting_down":
				case r.status == http.StatusOK && r.done && r.errCode == "service_shutting_down" && r.finish == "":
				case r.status == http.StatusOK && r.done && r.errCode == "" && (r.finish == "stop" || r.finish == "length"):
				default:
					t.Errorf("request %d ended as %+v", j, r)
				}
				if m.drain > time.Second && r.finish == "" {
					t.Errorf("request %d did not finish within a long drain: %+v", j, r)
				}
			}
		})
	}
}

// health reads /health over the network.
func health(t *testing.T, base string) healthBody {
	t.Helper()
	var h healthBody
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}
