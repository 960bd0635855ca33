package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while the command writes.
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

// TestServeDemo runs `aima-engine serve --demo` end to end: the readiness
// line, one chat request answered, and a clean stop when the context ends
// (as SIGTERM ends it in main).
func TestServeDemo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := root()
	var out, errb syncBuffer
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SetArgs([]string{"serve", "--demo", "--port", "0", "--buckets", "16,64", "--context-tokens", "256"})
	done := make(chan error, 1)
	go func() { done <- c.ExecuteContext(ctx) }()

	var ready struct {
		Event, Address, Model string
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if line, _, ok := strings.Cut(out.String(), "\n"); ok {
			if err := json.Unmarshal([]byte(line), &ready); err != nil {
				t.Fatalf("readiness line %q: %v", line, err)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited before it was ready: %v\n%s", err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no readiness line; stderr:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready.Event != "ready" || ready.Model != "aima-demo-tiny" {
		t.Fatalf("readiness %+v", ready)
	}
	body := `{"model":"aima-demo-tiny","messages":[{"role":"user","content":"Hello!"}],"max_tokens":8,"temperature":0}`
	resp, err := http.Post(ready.Address+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"chat.completion"`) {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	if !strings.Contains(errb.String(), "memory plan:") {
		t.Errorf("no memory plan on stderr:\n%s", errb.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}
