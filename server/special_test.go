package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/server"
)

// TestSpecialTokens checks that the vocabulary's control tokens stay out of
// the text unless skip_special_tokens is false, on chat and completions,
// streamed and not.
func TestSpecialTokens(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	script := "Hm.</think>\n\nYes<|fim_pad|> sir</think>."
	if ids := h.f.tok.Encode("<|fim_pad|></think>"); len(ids) != 2 {
		t.Fatalf("the tiny vocabulary lacks the control tokens: %v", ids)
	}
	tests := []struct {
		name, path, body string
		want             string
	}{
		{"chat", "/v1/chat/completions", `"messages":[{"role":"user","content":"x"}]`, "Yes sir."},
		{"chat keeping them", "/v1/chat/completions", `"messages":[{"role":"user","content":"x"}],"skip_special_tokens":false`, "Yes<|fim_pad|> sir</think>."},
		{"completions", "/v1/completions", `"prompt":"x","max_tokens":30`, "Hm.</think>\n\nYes sir</think>."},
		{"completions keeping them", "/v1/completions", `"prompt":"x","max_tokens":30,"skip_special_tokens":false`, script},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.eng.say(h.f, script)
			body := `{"model":"` + modelID + `",` + tt.body + `}`
			r := h.do(t, http.MethodPost, tt.path, body)
			var got string
			if tt.path == "/v1/completions" {
				got = decode[struct {
					Choices []struct {
						Text string `json:"text"`
					} `json:"choices"`
				}](t, r).Choices[0].Text
			} else {
				got = decode[chatBody](t, r).Choices[0].Message.Content
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			// Streamed, token by token, the same text.
			h.eng.say(h.f, script)
			streamed := ""
			for _, e := range h.stream(t, tt.path, strings.TrimSuffix(body, "}")+`,"stream":true}`) {
				var c struct {
					Choices []struct {
						Text  string `json:"text"`
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				json.Unmarshal([]byte(e.data), &c)
				if len(c.Choices) == 1 {
					streamed += c.Choices[0].Text + c.Choices[0].Delta.Content
				}
			}
			if diff := cmp.Diff(tt.want, streamed); diff != "" {
				t.Errorf("streamed text (-want +got):\n%s", diff)
			}
		})
	}
}
