package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/server"
)

// chatBody is the whole chat answer, as far as these tests read it.
type chatBody struct {
	Choices []struct {
		Message struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens        int `json:"completion_tokens"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// TestThinkingBudget checks that a spent thinking budget closes the
// reasoning with the template's own closing tokens, fed to the engine, that
// the answer continues after it, and that usage counts the reasoning.
func TestThinkingBudget(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	closing := h.f.tok.Encode("\n</think>\n\n")
	for _, tt := range []struct {
		name, extra string
		budget      int
		maxTokens   int
	}{
		{"thinking_budget", `"thinking_budget":5`, 5, 20},
		{"zero budget", `"thinking_budget":0`, 0, 12},
		{"reasoning_effort minimal", `"reasoning_effort":"minimal"`, 256, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.eng.forever(h.f, " and") // one token
			body := `{"model":"` + modelID + `","messages":[{"role":"user","content":"Think."}],"max_tokens":` + strconv.Itoa(tt.maxTokens) + `,` + tt.extra + `}`
			r := decode[chatBody](t, h.do(t, http.MethodPost, "/v1/chat/completions", body))
			c := r.Choices[0]
			if want := strings.TrimSpace(strings.Repeat(" and", tt.budget)); c.Message.ReasoningContent != want {
				t.Errorf("reasoning %q, want %q", c.Message.ReasoningContent, want)
			}
			answer := tt.maxTokens - tt.budget - len(closing)
			if want := strings.Repeat(" and", answer); c.Message.Content != want || c.FinishReason != "length" {
				t.Errorf("content %q (%s), want %q", c.Message.Content, c.FinishReason, want)
			}
			// The closing tokens are everything fed that the script did not draw.
			h.eng.mu.Lock()
			fed := slices.Clone(h.eng.wrong)
			h.eng.wrong = nil
			h.eng.mu.Unlock()
			if diff := cmp.Diff(closing, fed); diff != "" {
				t.Errorf("tokens fed besides the drawn ones (-template's close +fed):\n%s", diff)
			}
			// "\n" and "</think>" are reasoning; "\n\n" after them is the answer's.
			if got, want := r.Usage.CompletionTokensDetails.ReasoningTokens, tt.budget+len(h.f.tok.Encode("\n</think>")); got != want || r.Usage.CompletionTokens != tt.maxTokens {
				t.Errorf("usage %+v, want %d reasoning tokens of %d", r.Usage, want, tt.maxTokens)
			}

			// Streamed, the same answer.
			var streamed chatBody
			streamed.Choices = append(streamed.Choices, c)
			streamed.Choices[0].Message.Content, streamed.Choices[0].Message.ReasoningContent = "", ""
			evs := h.stream(t, "/v1/chat/completions", strings.TrimSuffix(body, "}")+`,"stream":true,"stream_options":{"include_usage":true}}`)
			for _, e := range evs {
				var ch struct {
					Choices []struct {
						Delta struct {
							Content          string `json:"content"`
							ReasoningContent string `json:"reasoning_content"`
						} `json:"delta"`
					} `json:"choices"`
					Usage *json.RawMessage `json:"usage"`
				}
				json.Unmarshal([]byte(e.data), &ch)
				if len(ch.Choices) == 1 {
					streamed.Choices[0].Message.Content += ch.Choices[0].Delta.Content
					streamed.Choices[0].Message.ReasoningContent += ch.Choices[0].Delta.ReasoningContent
				}
				if ch.Usage != nil {
					json.NewDecoder(bytes.NewReader(*ch.Usage)).Decode(&streamed.Usage)
				}
			}
			if diff := cmp.Diff(r, streamed); diff != "" {
				t.Errorf("streamed differs (-whole +streamed):\n%s", diff)
			}
			h.eng.mu.Lock()
			h.eng.wrong = nil
			h.eng.mu.Unlock()
		})
	}
}

// TestThinkingBudgetResponses checks the Responses API: reasoning.effort's
// budget closes the reasoning, and output_tokens_details counts it.
func TestThinkingBudgetResponses(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.forever(h.f, " and") // one token
	r := decode[struct {
		Usage struct {
			OutputTokens        int `json:"output_tokens"`
			OutputTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		} `json:"usage"`
	}](t, h.do(t, http.MethodPost, "/v1/responses", `{"model":"`+modelID+`","input":"Think.","max_output_tokens":20,"thinking_budget":3}`))
	if got, want := r.Usage.OutputTokensDetails.ReasoningTokens, 3+len(h.f.tok.Encode("\n</think>")); got != want || r.Usage.OutputTokens != 20 {
		t.Errorf("usage %+v, want %d reasoning tokens of 20", r.Usage, want)
	}
}

// TestThinkingBudgetInvalid checks the bounds of thinking_budget.
func TestThinkingBudgetInvalid(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	for _, v := range []string{"-1", "1.5", `"10"`, "2000000"} {
		r := h.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"`+modelID+`","messages":[{"role":"user","content":"x"}],"thinking_budget":`+v+`}`)
		if r.status != http.StatusBadRequest || r.errorCode() != "invalid_request" {
			t.Errorf("thinking_budget %s: %d %s", v, r.status, r.body)
		}
	}
}
