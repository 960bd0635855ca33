package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
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

// TestUnfinishedByteBeforeControl checks that a UTF-8 sequence cut off by a
// control token ends before it: the reasoning gets its U+FFFD and the
// answer starts with the answer's own text, streamed and not.
func TestUnfinishedByteBeforeControl(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	// Encode would mend the lone byte, so the ids are scripted directly:
	// "Hm", the byte 0xC5 (a lead byte whose continuation never comes),
	// then </think> and the answer.
	lone := int32(-1)
	for id := range int32(h.f.tok.Size()) {
		if string(h.f.tok.TokenBytes(id)) == "\xc5" {
			lone = id
		}
	}
	if lone < 0 {
		t.Fatal("the tiny vocabulary has no token of the byte 0xC5")
	}
	ids := append(h.f.tok.Encode("Hm"), lone)
	ids = append(ids, h.f.tok.Encode("</think>\n\nYes.")...)
	script := func() {
		h.eng.mu.Lock()
		defer h.eng.mu.Unlock()
		h.eng.answer, h.eng.loop = slices.Clone(ids), false
	}
	body := `{"model":"` + modelID + `","messages":[{"role":"user","content":"x"}]}`
	script()
	msg := decode[chatBody](t, h.do(t, http.MethodPost, "/v1/chat/completions", body)).Choices[0].Message
	if diff := cmp.Diff([2]string{"Hm\uFFFD", "Yes."}, [2]string{msg.ReasoningContent, msg.Content}); diff != "" {
		t.Errorf("reasoning and answer (-want +got):\n%s", diff)
	}
	script()
	var reasoning, content string
	for _, e := range h.stream(t, "/v1/chat/completions", strings.TrimSuffix(body, "}")+`,"stream":true}`) {
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(e.data), &c)
		if len(c.Choices) == 1 {
			reasoning += c.Choices[0].Delta.ReasoningContent
			content += c.Choices[0].Delta.Content
		}
	}
	if diff := cmp.Diff([2]string{"Hm\uFFFD", "Yes."}, [2]string{reasoning, content}); diff != "" {
		t.Errorf("streamed reasoning and answer (-want +got):\n%s", diff)
	}
}
