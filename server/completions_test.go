package server_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aimaproject/aimac/server"
)

// completionResult is what a text completion says, streamed or not.
type completionResult struct {
	Text, Finish             string
	PromptTokens, Completion int64
	Tokens                   []string
	Offsets                  []int64
}

func fromTextCompletion(t testing.TB, c *oai.Completion) completionResult {
	t.Helper()
	if len(c.Choices) != 1 || !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" || c.Model != modelID {
		t.Fatalf("completion %s", c.RawJSON())
	}
	ch := c.Choices[0]
	return completionResult{Text: ch.Text, Finish: string(ch.FinishReason), PromptTokens: c.Usage.PromptTokens,
		Completion: c.Usage.CompletionTokens, Tokens: ch.Logprobs.Tokens, Offsets: ch.Logprobs.TextOffset}
}

func fromTextStream(t testing.TB, s *ssestream.Stream[oai.Completion]) completionResult {
	t.Helper()
	var r completionResult
	finished := false
	for s.Next() {
		c := s.Current()
		if len(c.Choices) == 0 {
			if finished && c.JSON.Usage.Valid() {
				r.PromptTokens, r.Completion = c.Usage.PromptTokens, c.Usage.CompletionTokens
				continue
			}
			t.Errorf("chunk without choices: %s", c.RawJSON())
			continue
		}
		if finished {
			t.Errorf("chunk after the finish: %s", c.RawJSON())
		}
		ch := c.Choices[0]
		r.Text += ch.Text
		r.Tokens = append(r.Tokens, ch.Logprobs.Tokens...)
		r.Offsets = append(r.Offsets, ch.Logprobs.TextOffset...)
		if ch.FinishReason != "" {
			r.Finish, finished = string(ch.FinishReason), true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Error("no finish chunk")
	}
	return r
}

// TestCompletions runs text completions with text and token-id prompts,
// echo, stop strings and logprobs, each streamed and not.
func TestCompletions(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	prompt := "Once upon a time"
	ids := h.f.tok.Encode(prompt)
	ids64 := make([]int64, len(ids))
	for i, id := range ids {
		ids64[i] = int64(id)
	}
	story := " there was a <think> cat </think> who sat."
	storyTokens := int64(len(h.f.tok.Encode(story)))
	tests := []struct {
		name   string
		script string
		params oai.CompletionNewParams
		want   completionResult
	}{{
		name:   "text prompt; markers are plain text here",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)}, MaxTokens: oai.Int(100)},
		want:   completionResult{Text: story, Finish: "stop", Completion: storyTokens + 1},
	}, {
		name:   "token-id prompt",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids64}, MaxTokens: oai.Int(100)},
		want:   completionResult{Text: story, Finish: "stop", Completion: storyTokens + 1},
	}, {
		name:   "a one-element batch is one prompt",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{ids64}}, MaxTokens: oai.Int(100)},
		want:   completionResult{Text: story, Finish: "stop", Completion: storyTokens + 1},
	}, {
		name:   "echo",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)}, MaxTokens: oai.Int(100), Echo: oai.Bool(true)},
		want:   completionResult{Text: prompt + story, Finish: "stop", Completion: storyTokens + 1},
	}, {
		name:   "echo of a token-id prompt",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids64}, MaxTokens: oai.Int(100), Echo: oai.Bool(true)},
		want:   completionResult{Text: prompt + story, Finish: "stop", Completion: storyTokens + 1},
	}, {
		name:   "stop string",
		script: story,
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)},
			Stop: oai.CompletionNewParamsStopUnion{OfStringArray: []string{"cat"}}},
		want: completionResult{Text: " there was a <think> ", Finish: "stop"},
	}, {
		name:   "16 tokens by default",
		script: strings.Repeat(" la", 40),
		params: oai.CompletionNewParams{Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String(prompt)}},
		want:   completionResult{Text: decodeFirst(t, h, strings.Repeat(" la", 40), 16), Finish: "length", Completion: 16},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.eng.say(h.f, tc.script)
			p := tc.params
			p.Model = modelID
			res, err := c.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			// No chat template: the prompt is prefilled as given.
			prefilled := h.eng.lastIDs(t)
			if !slices.Equal(prefilled, ids) {
				t.Errorf("prefilled %v, want %v", prefilled, ids)
			}
			got := fromTextCompletion(t, res)
			want := tc.want
			want.PromptTokens = int64(len(ids))
			if want.Completion == 0 {
				want.Completion = got.Completion
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			streamed := fromTextStream(t, c.Completions.NewStreaming(ctx, p))
			if diff := cmp.Diff(got, streamed); diff != "" {
				t.Errorf("streamed (-non-streamed +streamed):\n%s", diff)
			}
			h.eng.checkFed(t)
		})
	}
}

// decodeFirst is the text of the first n tokens of s.
func decodeFirst(t testing.TB, h *harness, s string, n int) string {
	t.Helper()
	text, err := h.f.tok.Decode(h.f.tok.Encode(s)[:n], false)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestCompletionLogprobs checks the legacy logprobs lists, streamed and not.
func TestCompletionLogprobs(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	story := " there was a cat."
	h.eng.say(h.f, story)
	p := oai.CompletionNewParams{Model: modelID, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once")},
		Logprobs: oai.Int(2), MaxTokens: oai.Int(50)}
	res, err := c.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	lp := res.Choices[0].Logprobs
	if strings.Join(lp.Tokens, "") != story {
		t.Errorf("tokens %q spell %q", lp.Tokens, strings.Join(lp.Tokens, ""))
	}
	offset := int64(0)
	for i := range lp.Tokens {
		if lp.TextOffset[i] != offset {
			t.Errorf("text_offset[%d] = %d, want %d", i, lp.TextOffset[i], offset)
		}
		offset += int64(len(lp.Tokens[i]))
		if lp.TokenLogprobs[i] > 0 || lp.TokenLogprobs[i] < -1e-6 {
			t.Errorf("token_logprobs[%d] = %g", i, lp.TokenLogprobs[i])
		}
		if len(lp.TopLogprobs[i]) != 2 {
			t.Errorf("top_logprobs[%d] = %v", i, lp.TopLogprobs[i])
		}
	}
	streamed := fromTextStream(t, c.Completions.NewStreaming(ctx, p))
	got := fromTextCompletion(t, res)
	if diff := cmp.Diff(got.Tokens, streamed.Tokens); diff != "" {
		t.Errorf("streamed tokens (-non-streamed +streamed):\n%s", diff)
	}
	if diff := cmp.Diff(got.Offsets, streamed.Offsets); diff != "" {
		t.Errorf("streamed offsets (-non-streamed +streamed):\n%s", diff)
	}
}

// TestCompletionErrors checks what only completions refuse.
func TestCompletionErrors(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	for _, tc := range []struct {
		name, body string
		want       errorReply
	}{
		{"token id outside the vocabulary", `{"model":"test/tiny","prompt":[1,2,99999999]}`,
			errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "prompt"}},
		{"negative token id", `{"model":"test/tiny","prompt":[1,-2]}`,
			errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "prompt[1]"}},
		{"batch of prompts", `{"model":"test/tiny","prompt":["a","b"]}`,
			errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "prompt"}},
		{"empty prompt", `{"model":"test/tiny","prompt":""}`,
			errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "prompt"}},
		{"suffix", `{"model":"test/tiny","prompt":"a","suffix":"b"}`,
			errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "suffix"}},
		{"max_tokens beyond the context", `{"model":"test/tiny","prompt":"a","max_tokens":4096}`,
			errorReply{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error"}},
	} {
		r := h.do(t, http.MethodPost, "/v1/completions", tc.body)
		if diff := cmp.Diff(tc.want, errorOf(r, "")); diff != "" {
			t.Errorf("%s (-want +got):\n%s\n%s", tc.name, diff, r.body)
		}
	}
}
