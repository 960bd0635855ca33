package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/server"
)

// TestRenderChat: RenderChat's prompt is the one the chat endpoint
// prefills, token for token, with thinking on, off, and a required tool
// call (constrained, with thinking off);
// bad requests get the endpoint's errors.
func TestRenderChat(t *testing.T) {
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	for _, tt := range []struct {
		name string
		cfg  server.Config
		body string
		tail string // the rendered text ends so
	}{
		{"thinking", server.Config{}, `{"model":"test/tiny","messages":[{"role":"user","content":"Hi"}]}`, "<think>\n"},
		{"no thinking", server.Config{DisableThinking: true}, `{"model":"test/tiny","messages":[{"role":"user","content":"Hi"}]}`, "</think>\n\n"},
		{"forced tool", server.Config{}, `{"model":"test/tiny","messages":[{"role":"user","content":"Weather?"}],` + tools + `,"tool_choice":"required"}`, "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, tt.cfg)
			h.eng.say(h.f, "ok")
			if r := h.do(t, http.MethodPost, "/v1/chat/completions", tt.body); r.status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.status, r.body)
			}
			got, apiErr := h.srv.RenderChat(h.f.model(h.eng), []byte(tt.body))
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			h.eng.mu.Lock()
			prefilled := slices.Clone(h.eng.prompt)
			h.eng.mu.Unlock()
			if !slices.Equal(got.IDs, prefilled) {
				t.Errorf("RenderChat ids %v, the endpoint prefilled %v", got.IDs, prefilled)
			}
			if !strings.HasPrefix(got.Text, "<|im_start|>") || !strings.HasSuffix(got.Text, tt.tail) {
				t.Errorf("text %q, want it to end in %q", got.Text, tt.tail)
			}
			if want := h.f.tok.Encode(got.Text); !slices.Equal(want, got.IDs) {
				t.Errorf("ids are not the text's tokens")
			}
		})
	}
	h := start(t, server.Config{})
	for body, code := range map[string]string{
		`{"model":"x","messages":[]}`: openai.CodeInvalidRequest,
		`{"messages":`:                openai.CodeInvalidJSON,
	} {
		if _, apiErr := h.srv.RenderChat(h.f.model(h.eng), []byte(body)); apiErr == nil || apiErr.Code != code {
			t.Errorf("%s: %+v, want code %s", body, apiErr, code)
		}
	}
}
