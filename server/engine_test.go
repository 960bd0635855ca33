package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/server"
)

// TestRealEngine serves the tiny checkpoint on the CPU engine: every
// endpoint runs the real model, and greedy streamed and non-streamed
// outputs of the same request are identical.
func TestRealEngine(t *testing.T) {
	t.Parallel()
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := server.New(server.Config{})
	srv.SetModel(f.model(l.Engine))
	h := &harness{f: f, srv: srv, ts: httptest.NewServer(srv.Handler())}
	defer h.ts.Close()
	ctx := context.Background()
	c := h.client()

	// greedyChat is one chat request, non-streamed then streamed.
	greedyChat := func(t *testing.T, p oai.ChatCompletionNewParams, opts ...option.RequestOption) answer {
		t.Helper()
		p.Temperature = oai.Float(0)
		res, err := c.Chat.Completions.New(ctx, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		got := fromCompletion(t, res)
		p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		streamed, chunks := fromStream(t, c.Chat.Completions.NewStreaming(ctx, p, opts...))
		if diff := cmp.Diff(got, streamed); diff != "" {
			t.Errorf("streamed differs from non-streamed (-non-streamed +streamed):\n%s", diff)
		}
		if got.Completion > 4 && chunks < 4 {
			t.Errorf("%d completion tokens came in %d chunks", got.Completion, chunks)
		}
		return got
	}

	var thinking answer
	t.Run("chat", func(t *testing.T) {
		p := params("Hello! Who are you?")
		p.MaxCompletionTokens = oai.Int(24)
		thinking = greedyChat(t, p)
		if thinking.Finish != "length" && thinking.Finish != "stop" || thinking.Reasoning == "" && thinking.Content == "" {
			t.Errorf("answer %+v", thinking)
		}
		// Greedy is deterministic across requests.
		if again := greedyChat(t, p); !cmp.Equal(thinking, again) {
			t.Errorf("the same greedy request answered differently:\n%+v\n%+v", thinking, again)
		}
		off := greedyChat(t, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		if off.Reasoning != "" {
			t.Errorf("thinking off produced reasoning %q", off.Reasoning)
		}
	})

	t.Run("chat with logprobs", func(t *testing.T) {
		p := params("Hi")
		p.MaxCompletionTokens, p.Logprobs, p.TopLogprobs = oai.Int(8), oai.Bool(true), oai.Int(5)
		got := greedyChat(t, p)
		if len(got.Logprobs) == 0 {
			t.Fatal("no logprobs")
		}
		for i, l := range got.Logprobs {
			// Greedy picks the most likely token: it heads its alternatives.
			if len(l.Top) != 5 || l.Top[0] != l.Token || l.Logprob > 0 || l.Logprob < -100 {
				t.Errorf("token %d: %+v", i, l)
			}
		}
	})

	t.Run("seeded sampling is reproducible", func(t *testing.T) {
		p := params("Tell me a story.")
		p.MaxCompletionTokens, p.Temperature, p.Seed = oai.Int(16), oai.Float(1), oai.Int(42)
		a, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fromCompletion(t, a), fromCompletion(t, b)); diff != "" {
			t.Errorf("same seed, different answers:\n%s", diff)
		}
	})

	t.Run("stop string", func(t *testing.T) {
		p := params("Hello! Who are you?")
		p.MaxCompletionTokens = oai.Int(40)
		full := greedyChat(t, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		if len([]rune(full.Content)) < 10 {
			t.Fatalf("the greedy answer %q is too short to cut: the test needs a longer one", full.Content)
		}
		runes := []rune(full.Content)
		stop := string(runes[len(runes)/2 : len(runes)/2+2])
		p.Stop = oai.ChatCompletionNewParamsStopUnion{OfString: oai.String(stop)}
		cut := greedyChat(t, p, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
		if want := full.Content[:strings.Index(full.Content, stop)]; cut.Content != want || cut.Finish != "stop" {
			t.Errorf("stop %q: content %q finish %s, want %q", stop, cut.Content, cut.Finish, want)
		}
	})

	t.Run("completions", func(t *testing.T) {
		for _, echo := range []bool{false, true} {
			p := oai.CompletionNewParams{Model: modelID, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon a time")},
				MaxTokens: oai.Int(20), Temperature: oai.Float(0), Echo: oai.Bool(echo)}
			res, err := c.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got := fromTextCompletion(t, res)
			if echo != strings.HasPrefix(got.Text, "Once upon a time") || got.Completion != 20 && got.Finish != "stop" {
				t.Errorf("echo %v: %+v", echo, got)
			}
			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			if diff := cmp.Diff(got, fromTextStream(t, c.Completions.NewStreaming(ctx, p))); diff != "" {
				t.Errorf("echo %v: streamed (-non-streamed +streamed):\n%s", echo, diff)
			}
		}
	})

	t.Run("responses", func(t *testing.T) {
		p := responses.ResponseNewParams{Model: modelID, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Hello! Who are you?")},
			MaxOutputTokens: oai.Int(24), Temperature: oai.Float(0)}
		res, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got := summarize(t, res)
		final, _ := fromResponseStream(t, c.Responses.NewStreaming(ctx, p))
		if diff := cmp.Diff(got, summarize(t, final)); diff != "" {
			t.Errorf("streamed (-non-streamed +streamed):\n%s", diff)
		}
		// The Responses API renders the same conversation as chat.
		if got.Reasoning != thinking.Reasoning || got.Text != thinking.Content || got.Output != thinking.Completion {
			t.Errorf("responses %+v, chat %+v", got, thinking)
		}
		next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, PreviousResponseID: oai.String(res.ID),
			Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("And then?")}, MaxOutputTokens: oai.Int(8)})
		if err != nil {
			t.Fatal(err)
		}
		if next.Usage.InputTokens <= res.Usage.InputTokens {
			t.Errorf("the follow-up prompt (%d tokens) does not hold the first exchange (%d)", next.Usage.InputTokens, res.Usage.InputTokens)
		}
	})

	t.Run("tokenize", func(t *testing.T) {
		type tokens struct {
			Tokens []int32 `json:"tokens"`
			Count  int     `json:"count"`
		}
		got := decode[tokens](t, h.do(t, http.MethodPost, "/tokenize", map[string]any{"prompt": "Hello! Who are you?"}))
		if diff := cmp.Diff(f.tok.Encode("Hello! Who are you?"), got.Tokens); diff != "" {
			t.Errorf("(-tokenizer +server):\n%s", diff)
		}
		chat := decode[tokens](t, h.do(t, http.MethodPost, "/tokenize", map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "Hello! Who are you?"}}}))
		if int64(chat.Count) != thinking.PromptTokens {
			t.Errorf("tokenize counts %d, chat prefilled %d", chat.Count, thinking.PromptTokens)
		}
	})

	t.Run("a cancelled request leaves the engine sound", func(t *testing.T) {
		p := params("Hello! Who are you?")
		p.MaxCompletionTokens = oai.Int(24)
		before := greedyChat(t, p)
		cctx, cancel := context.WithCancel(ctx)
		s := c.Chat.Completions.NewStreaming(cctx, oai.ChatCompletionNewParams{Model: modelID, MaxCompletionTokens: oai.Int(400),
			Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("Write a very long story.")}})
		for n := 0; n < 3 && s.Next(); n++ {
		}
		cancel()
		s.Close()
		waitFor(t, 10*time.Second, "the cancelled request to leave", func() bool {
			q := h.health(t).Queue
			return q.Running == 0 && q.Waiting == 0
		})
		if after := greedyChat(t, p); !cmp.Equal(before, after) {
			t.Errorf("after a cancelled request the same greedy request answered differently:\n%+v\n%+v", before, after)
		}
	})
}
