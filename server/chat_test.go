package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aimaproject/aimac/server"
)

// answer is what a chat completion says, streamed or not, in a form two
// requests can be compared by (tool call ids differ per request).
type answer struct {
	Content, Reasoning, Finish string
	ContentNull                bool
	Calls                      []call
	PromptTokens, Completion   int64
	Logprobs                   []logprob
}

type call struct{ Name, Arguments string }

type logprob struct {
	Token   string
	Logprob float64
	Top     []string
}

// rawString decodes a JSON string the client kept as an unknown field
// (which it never calls valid: it has no type for it).
func rawString(t testing.TB, f respjson.Field) string {
	t.Helper()
	if f.Raw() == "" || f.Raw() == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
		t.Fatalf("%s: %v", f.Raw(), err)
	}
	return s
}

func logprobsOf(lps []oai.ChatCompletionTokenLogprob) []logprob {
	var out []logprob
	for _, l := range lps {
		lp := logprob{Token: l.Token, Logprob: l.Logprob}
		for _, a := range l.TopLogprobs {
			lp.Top = append(lp.Top, a.Token)
		}
		out = append(out, lp)
	}
	return out
}

// fromCompletion reads a non-streamed completion.
func fromCompletion(t testing.TB, c *oai.ChatCompletion) answer {
	t.Helper()
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices", len(c.Choices))
	}
	ch := c.Choices[0]
	a := answer{Content: ch.Message.Content, Reasoning: rawString(t, ch.Message.JSON.ExtraFields["reasoning_content"]),
		Finish: ch.FinishReason, ContentNull: !ch.Message.JSON.Content.Valid(),
		PromptTokens: c.Usage.PromptTokens, Completion: c.Usage.CompletionTokens, Logprobs: logprobsOf(ch.Logprobs.Content)}
	for _, tc := range ch.Message.ToolCalls {
		if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
			t.Errorf("tool call id %q type %q", tc.ID, tc.Type)
		}
		a.Calls = append(a.Calls, call{tc.Function.Name, tc.Function.Arguments})
	}
	if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Model != modelID {
		t.Errorf("id %q object %q model %q", c.ID, c.Object, c.Model)
	}
	if c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Errorf("usage %+v", c.Usage)
	}
	return a
}

// fromStream reads a stream to its end, checking the chunks' shape: the
// role first, tool calls opened with their id and name before any argument,
// one finish chunk, and a usage chunk without choices last.
func fromStream(t testing.TB, s *ssestream.Stream[oai.ChatCompletionChunk]) (answer, int) {
	t.Helper()
	var a answer
	n, finished, usage := 0, false, false
	ids := map[int64]string{}
	for s.Next() {
		c := s.Current()
		n++
		if usage {
			t.Errorf("chunk after the usage chunk: %s", c.RawJSON())
		}
		if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion.chunk" {
			t.Errorf("chunk id %q object %q", c.ID, c.Object)
		}
		if len(c.Choices) == 0 {
			if !c.JSON.Usage.Valid() || c.Usage.TotalTokens == 0 {
				t.Errorf("chunk without choices or usage: %s", c.RawJSON())
			}
			a.PromptTokens, a.Completion, usage = c.Usage.PromptTokens, c.Usage.CompletionTokens, true
			continue
		}
		if c.JSON.Usage.Valid() {
			t.Errorf("usage on a chunk with choices: %s", c.RawJSON())
		}
		ch := c.Choices[0]
		if finished {
			t.Errorf("chunk after the finish chunk: %s", c.RawJSON())
		}
		if (n == 1) != (ch.Delta.Role == "assistant") {
			t.Errorf("chunk %d has role %q", n, ch.Delta.Role)
		}
		a.Content += ch.Delta.Content
		a.Reasoning += rawString(t, ch.Delta.JSON.ExtraFields["reasoning_content"])
		for _, tc := range ch.Delta.ToolCalls {
			if _, open := ids[tc.Index]; !open {
				if tc.ID == "" || tc.Function.Name == "" || tc.Type != "function" || tc.Function.Arguments != "" {
					t.Errorf("tool call %d opened without its id and name first: %s", tc.Index, c.RawJSON())
				}
				ids[tc.Index] = tc.ID
				a.Calls = append(a.Calls, call{Name: tc.Function.Name})
				continue
			}
			if tc.ID != "" || tc.Function.Name != "" {
				t.Errorf("tool call %d repeats its id or name: %s", tc.Index, c.RawJSON())
			}
			a.Calls[tc.Index].Arguments += tc.Function.Arguments
		}
		a.Logprobs = append(a.Logprobs, logprobsOf(ch.Logprobs.Content)...)
		if ch.FinishReason != "" {
			a.Finish, finished = ch.FinishReason, true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// A stream has no null content; the message would have had one.
	a.ContentNull = a.Content == "" && len(a.Calls) > 0
	if !finished {
		t.Error("no finish chunk")
	}
	return a, n
}

// weatherTool has a string, an integer and a string that looks like a
// number, so that conversion by schema shows.
var weatherTool = oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:        "get_weather",
	Description: oai.String("Weather forecast for a city"),
	Parameters: shared.FunctionParameters{
		"type": "object",
		"properties": map[string]any{
			"city": map[string]any{"type": "string"},
			"days": map[string]any{"type": "integer"},
			"zip":  map[string]any{"type": "string"},
		},
		"required": []string{"city"},
	},
})

const weatherCall = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n" +
	"<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n</tool_call>"

// arguments decodes tool call arguments keeping numbers as json.Number,
// so that a number and a string that looks like one differ.
func arguments(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("arguments %q: %v", s, err)
	}
	return m
}

func params(user string) oai.ChatCompletionNewParams {
	return oai.ChatCompletionNewParams{Model: modelID, Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage(user)}}
}

// TestChatScripted runs chat requests whose answers are scripted, each
// non-streamed and streamed, and checks that both say the same.
func TestChatScripted(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	noThink := option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false})
	tests := []struct {
		name   string
		script string
		params func(*oai.ChatCompletionNewParams)
		opts   []option.RequestOption
		want   answer
		// prompt, when set, is a substring the rendered prompt must end with.
		promptEnd string
	}{{
		name:      "reasoning and content",
		script:    "I think.\n</think>\n\nParis is the capital.",
		want:      answer{Reasoning: "I think.", Content: "Paris is the capital.", Finish: "stop"},
		promptEnd: "<|im_start|>assistant\n<think>\n",
	}, {
		name:      "thinking off",
		script:    "Paris is the capital.",
		opts:      []option.RequestOption{noThink},
		want:      answer{Content: "Paris is the capital.", Finish: "stop"},
		promptEnd: "<|im_start|>assistant\n<think>\n\n</think>\n\n",
	}, {
		name:      "reasoning_effort none turns thinking off",
		script:    "Paris.",
		params:    func(p *oai.ChatCompletionNewParams) { p.ReasoningEffort = shared.ReasoningEffortNone },
		want:      answer{Content: "Paris.", Finish: "stop"},
		promptEnd: "<think>\n\n</think>\n\n",
	}, {
		name:   "tool call with arguments converted by schema",
		script: "I should look it up.\n</think>\n\n" + weatherCall,
		params: func(p *oai.ChatCompletionNewParams) { p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool} },
		want: answer{Reasoning: "I should look it up.", Finish: "tool_calls", ContentNull: true,
			Calls: []call{{"get_weather", `{"city": "Paris", "days": 3, "zip": "75001"}`}}},
	}, {
		name:   "content before two parallel calls",
		script: "Let me check.\n</think>\n\nChecking both.\n\n" + weatherCall + "\n" + strings.ReplaceAll(weatherCall, "Paris", "Oslo"),
		params: func(p *oai.ChatCompletionNewParams) { p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool} },
		want: answer{Reasoning: "Let me check.", Content: "Checking both.", Finish: "tool_calls", Calls: []call{
			{"get_weather", `{"city": "Paris", "days": 3, "zip": "75001"}`},
			{"get_weather", `{"city": "Oslo", "days": 3, "zip": "75001"}`}}},
	}, {
		name:   "parallel_tool_calls false stops after the first call",
		script: "Both.\n</think>\n\n" + weatherCall + "\n" + strings.ReplaceAll(weatherCall, "Paris", "Oslo"),
		params: func(p *oai.ChatCompletionNewParams) {
			p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
			p.ParallelToolCalls = oai.Bool(false)
		},
		want: answer{Reasoning: "Both.", Finish: "tool_calls", ContentNull: true,
			Calls: []call{{"get_weather", `{"city": "Paris", "days": 3, "zip": "75001"}`}}},
	}, {
		name:   "a tool call inside think is reasoning",
		script: weatherCall + "\n</think>\n\nNo call needed.",
		params: func(p *oai.ChatCompletionNewParams) { p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool} },
		want:   answer{Reasoning: weatherCall, Content: "No call needed.", Finish: "stop"},
	}, {
		name:   "tool_choice none leaves the tools out and the text as content",
		script: "Hm.\n</think>\n\n" + weatherCall,
		params: func(p *oai.ChatCompletionNewParams) {
			p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
			p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("none")}
		},
		want: answer{Reasoning: "Hm.", Content: weatherCall, Finish: "stop"},
	}, {
		name:   "tool_choice required constrains the answer to a call",
		script: "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
		params: func(p *oai.ChatCompletionNewParams) {
			p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
			p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("required")}
		},
		want:      answer{Finish: "tool_calls", ContentNull: true, Calls: []call{{"get_weather", `{"city": "Rome"}`}}},
		promptEnd: "<think>\n\n</think>\n\n",
	}, {
		name:   "a named tool_choice constrains the answer to that function",
		script: "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
		params: func(p *oai.ChatCompletionNewParams) {
			p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
			p.ToolChoice = oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
		},
		want:      answer{Finish: "tool_calls", ContentNull: true, Calls: []call{{"get_weather", `{"city": "Rome", "days": 2}`}}},
		promptEnd: "<think>\n\n</think>\n\n",
	}, {
		name:   "stop string",
		script: "Fine.\n</think>\n\nHello world. STOP here and more words.",
		params: func(p *oai.ChatCompletionNewParams) {
			p.Stop = oai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"never", "STOP"}}
		},
		want: answer{Reasoning: "Fine.", Content: "Hello world. ", Finish: "stop"},
	}, {
		name:   "stop strings do not apply to reasoning",
		script: "STOP is a word.\n</think>\n\nanswer STOP more",
		params: func(p *oai.ChatCompletionNewParams) {
			p.Stop = oai.ChatCompletionNewParamsStopUnion{OfString: oai.String("STOP")}
		},
		want: answer{Reasoning: "STOP is a word.", Content: "answer ", Finish: "stop"},
	}, {
		name:   "logprobs with a stop string and markup held back for tools",
		script: "Hm.\n</think>\n\nA <b> tag, < 3 and <tool STOP more",
		params: func(p *oai.ChatCompletionNewParams) {
			p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
			p.Stop = oai.ChatCompletionNewParamsStopUnion{OfString: oai.String("STOP")}
			p.Logprobs, p.TopLogprobs = oai.Bool(true), oai.Int(2)
		},
		want: answer{Reasoning: "Hm.", Content: "A <b> tag, < 3 and <tool ", Finish: "stop"},
	}, {
		name:   "max_tokens",
		script: "A long thought that goes on.\n</think>\n\nNever reached.",
		params: func(p *oai.ChatCompletionNewParams) { p.MaxCompletionTokens = oai.Int(3) },
		// The first three tokens of the script.
		want: answer{Reasoning: "A lon", Finish: "length", Completion: 3},
	}, {
		name:   "non-ASCII text survives token splits",
		script: "Größe 😀 ok.\n</think>\n\n日本語 <b>&</b> 😀",
		want:   answer{Reasoning: "Größe 😀 ok.", Content: "日本語 <b>&</b> 😀", Finish: "stop"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The subtests share one engine: one at a time.
			h.eng.say(h.f, tc.script)
			p := params("What is the weather in Paris?")
			if tc.params != nil {
				tc.params(&p)
			}
			c := h.client(tc.opts...)
			res, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got := fromCompletion(t, res)
			prompt := h.eng.lastPrompt(t, h.f)
			if tc.promptEnd != "" && !strings.HasSuffix(prompt, tc.promptEnd) {
				t.Errorf("the prompt ends %q, want %q", prompt[max(0, len(prompt)-80):], tc.promptEnd)
			}
			if want := int64(len(h.f.tok.Encode(prompt))); got.PromptTokens != want {
				t.Errorf("prompt_tokens %d, want %d", got.PromptTokens, want)
			}
			want := tc.want
			want.PromptTokens = got.PromptTokens
			if want.Completion == 0 {
				want.Completion = got.Completion
			}
			// Logprobs are checked against the stream below.
			want.Logprobs = got.Logprobs
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("non-streamed (-want +got):\n%s", diff)
			}
			for i, c := range got.Calls {
				// Numbers stay numbers and strings stay strings.
				args := arguments(t, c.Arguments)
				if days, ok := args["days"]; ok {
					if _, isNum := days.(json.Number); !isNum {
						t.Errorf("call %d: days is %T, want a number", i, days)
					}
				}
				if zip, ok := args["zip"]; ok {
					if _, isStr := zip.(string); !isStr {
						t.Errorf("call %d: zip is %T, want a string", i, zip)
					}
				}
			}
			h.eng.checkFed(t)

			p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
			streamed, _ := fromStream(t, c.Chat.Completions.NewStreaming(ctx, p))
			if diff := cmp.Diff(got, streamed); diff != "" {
				t.Errorf("streamed differs from non-streamed (-non-streamed +streamed):\n%s", diff)
			}
			h.eng.checkFed(t)
		})
	}
}

// TestChatStopsGenerating checks that a stop string and a single allowed
// tool call end the generation, not just the output.
func TestChatStopsGenerating(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	tail := strings.Repeat(" and then some more words", 20)
	for _, tc := range []struct {
		name  string
		body  map[string]any
		text  string
		cut   string // the script up to where generation must stop
		final string
	}{
		{"stop string", userChat("hi", map[string]any{"stop": "STOP", "chat_template_kwargs": map[string]any{"enable_thinking": false}}),
			"Hello STOP" + tail, "Hello STOP", "stop"},
		{"one tool call", userChat("hi", map[string]any{"parallel_tool_calls": false, "tools": []any{weatherToolJSON},
			"chat_template_kwargs": map[string]any{"enable_thinking": false}}),
			weatherCall + "\n" + weatherCall + tail, strings.TrimSuffix(weatherCall, "</tool_call>"), "tool_calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.eng.say(h.f, tc.text)
			before := h.eng.decodes.Load()
			res := decode[chatResponse](t, h.do(t, http.MethodPost, "/v1/chat/completions", tc.body))
			// The token that completes the cut is sampled from the last
			// Decode; none follows it.
			limit := int64(len(h.f.tok.Encode(tc.cut)))
			if n := h.eng.decodes.Load() - before; n > limit {
				t.Errorf("%d decode steps, want at most %d", n, limit)
			}
			if res.Choices[0].FinishReason != tc.final {
				t.Errorf("finish_reason %q, want %q", res.Choices[0].FinishReason, tc.final)
			}
		})
	}
}

// weatherToolJSON is weatherTool as raw JSON, for raw requests.
var weatherToolJSON = map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}, "zip": map[string]any{"type": "string"}}}}}

// chatResponse is the raw shape of a chat completion, for raw requests.
type chatResponse struct {
	ID      string `json:"id"`
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// TestChatToolRoundTrip sends the assistant's tool call and the tool's
// result back, as a client does, and checks what the template made of them.
func TestChatToolRoundTrip(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	h.eng.say(h.f, "Look it up.\n</think>\n\n"+weatherCall)
	p := params("Weather in Paris?")
	p.Tools = []oai.ChatCompletionToolUnionParam{weatherTool}
	first, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	msg := first.Choices[0].Message
	if len(msg.ToolCalls) != 1 {
		t.Fatalf("tool calls %+v", msg.ToolCalls)
	}
	h.eng.say(h.f, "Got it.\n</think>\n\nSunny, 21 °C.")
	p.Messages = append(p.Messages, msg.ToParam(), oai.ToolMessage(`{"sky":"sunny","temp":21}`, msg.ToolCalls[0].ID))
	second, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "Sunny, 21 °C." {
		t.Errorf("content %q", got)
	}
	prompt := h.eng.lastPrompt(t, h.f)
	for _, want := range []string{
		// The call is rendered back from its arguments object, the integer
		// printed by tojson and the strings as they are.
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n</function>\n</tool_call><|im_end|>",
		"<|im_start|>user\n<tool_response>\n{\"sky\":\"sunny\",\"temp\":21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n",
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, prompt)
		}
	}
}

// TestChatReasoningInput checks that assistant messages bring their
// reasoning back under either name.
func TestChatReasoningInput(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "Done.")
	for _, field := range []string{"reasoning_content", "reasoning"} {
		body := map[string]any{"model": modelID, "messages": []map[string]any{
			{"role": "user", "content": "Weather?"},
			{"role": "assistant", "content": nil, field: "Because " + field + ".", "tool_calls": []map[string]any{{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo","days":2}`}}}},
			{"role": "tool", "tool_call_id": "call_1", "content": "rain"},
		}, "tools": []any{weatherToolJSON}}
		decode[chatResponse](t, h.do(t, http.MethodPost, "/v1/chat/completions", body))
		prompt := h.eng.lastPrompt(t, h.f)
		want := "<|im_start|>assistant\n<think>\nBecause " + field + ".\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n2\n</parameter>"
		if !strings.Contains(prompt, want) {
			t.Errorf("%s: the prompt lacks %q:\n%s", field, want, prompt)
		}
	}
}

// TestChatLogprobs checks logprobs and top_logprobs, streamed and not.
func TestChatLogprobs(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	script := "Hm.\n</think>\n\nYes, 42 é."
	h.eng.say(h.f, script)
	p := params("Answer?")
	p.Logprobs, p.TopLogprobs = oai.Bool(true), oai.Int(3)
	res, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	lps := res.Choices[0].Logprobs.Content
	// One entry per generated token but the end-of-turn token, whose text
	// is never shown.
	if int64(len(lps)) != res.Usage.CompletionTokens-1 {
		t.Fatalf("%d logprobs for %d completion tokens", len(lps), res.Usage.CompletionTokens)
	}
	var text []byte
	for i, l := range lps {
		// The scripted logits make every token certain.
		if l.Logprob > 0 || l.Logprob < -1e-6 {
			t.Errorf("token %d %q: logprob %g, want ~0", i, l.Token, l.Logprob)
		}
		if len(l.TopLogprobs) != 3 || l.TopLogprobs[0].Token != l.Token || l.TopLogprobs[0].Logprob != l.Logprob {
			t.Errorf("token %d %q: top_logprobs %+v", i, l.Token, l.TopLogprobs)
		}
		for j := 1; j < len(l.TopLogprobs); j++ {
			if a := l.TopLogprobs[j]; a.Logprob > l.TopLogprobs[j-1].Logprob || math.IsNaN(a.Logprob) || a.Logprob < -9999 {
				t.Errorf("token %d: alternatives out of order: %+v", i, l.TopLogprobs)
			}
		}
		for _, b := range l.Bytes {
			text = append(text, byte(b))
		}
	}
	// The bytes of the tokens spell the raw output, markers included.
	if string(text) != script {
		t.Errorf("logprob bytes spell %q, want %q", text, script)
	}

	p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	streamed, _ := fromStream(t, c.Chat.Completions.NewStreaming(ctx, p))
	if diff := cmp.Diff(fromCompletion(t, res).Logprobs, streamed.Logprobs); diff != "" {
		t.Errorf("streamed logprobs (-non-streamed +streamed):\n%s", diff)
	}

	// Without logprobs the field is null.
	p.Logprobs, p.TopLogprobs, p.StreamOptions = oai.Bool(false), oai.Int(0), oai.ChatCompletionStreamOptionsParam{}
	res, err = c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Choices[0].JSON.Logprobs; f.Raw() != "null" {
		t.Errorf("logprobs %s, want null", f.Raw())
	}
}

// TestChatStreamWire checks the raw event stream: data lines only, the
// usage chunk with "choices": [] right before [DONE], content delivered
// token by token rather than in one piece.
func TestChatStreamWire(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "Thinking hard.\n</think>\n\nThe answer has <several> words & symbols.")
	evs := h.stream(t, "/v1/chat/completions", userChat("hi", map[string]any{"stream": true,
		"stream_options": map[string]any{"include_usage": true}}))
	contentChunks := 0
	for i, e := range evs {
		if e.name != "" {
			t.Errorf("event %d is named %q", i, e.name)
		}
		var c struct {
			Choices []struct {
				Delta map[string]json.RawMessage `json:"delta"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatal(err)
		}
		if i == len(evs)-1 {
			if c.Choices == nil || len(c.Choices) != 0 || c.Usage == nil || !strings.Contains(e.data, `"choices":[]`) {
				t.Errorf("last chunk is not the usage chunk: %s", e.data)
			}
			continue
		}
		if len(c.Choices) == 1 && c.Choices[0].Delta["content"] != nil && string(c.Choices[0].Delta["content"]) != `""` {
			contentChunks++
		}
	}
	if contentChunks < 5 {
		t.Errorf("content came in %d chunks; it should stream token by token", contentChunks)
	}
	// Markup reads as written, not \u003c-escaped.
	all := ""
	for _, e := range evs {
		all += e.data
	}
	if strings.Contains(all, `\u003c`) || strings.Contains(all, `\u0026`) || !strings.Contains(all, "<") {
		t.Errorf("streamed markup is escaped")
	}
	r := h.do(t, http.MethodPost, "/v1/chat/completions", userChat("hi", nil))
	if strings.Contains(string(r.body), `\u003c`) || !strings.Contains(string(r.body), "<several>") {
		t.Errorf("non-streamed content is escaped: %s", r.body)
	}
}

// TestChatToolCallDeltas checks the wire form of a streamed tool call: one
// delta with the index, id, type and name, then the arguments in several
// fragments as they are decoded.
func TestChatToolCallDeltas(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "Look.\n</think>\n\n"+weatherCall)
	evs := h.stream(t, "/v1/chat/completions", userChat("Weather?", map[string]any{"stream": true, "tools": []any{weatherToolJSON}}))
	type delta struct {
		Index    *int    `json:"index"`
		ID       *string `json:"id"`
		Type     *string `json:"type"`
		Function struct {
			Name      *string `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	}
	var calls []delta
	finish := ""
	for _, e := range evs {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []delta `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) == 1 {
			calls = append(calls, c.Choices[0].Delta.ToolCalls...)
			if c.Choices[0].FinishReason != nil {
				finish = *c.Choices[0].FinishReason
			}
		}
	}
	if len(calls) < 4 {
		t.Fatalf("the call came in %d deltas; its arguments should stream", len(calls))
	}
	first := calls[0]
	if first.Index == nil || *first.Index != 0 || first.ID == nil || !strings.HasPrefix(*first.ID, "call_") ||
		first.Type == nil || *first.Type != "function" || first.Function.Name == nil || *first.Function.Name != "get_weather" {
		t.Errorf("the first delta does not open the call: %+v", first)
	}
	args := ""
	for i, d := range calls[1:] {
		if d.Index == nil || *d.Index != 0 || d.ID != nil || d.Type != nil || d.Function.Name != nil || d.Function.Arguments == nil {
			t.Errorf("delta %d is not an argument fragment: %+v", i+1, d)
			continue
		}
		args += *d.Function.Arguments
	}
	if diff := cmp.Diff(map[string]any{"city": "Paris", "days": json.Number("3"), "zip": "75001"}, arguments(t, args)); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
	if finish != "tool_calls" {
		t.Errorf("finish_reason %q", finish)
	}
}

// TestThinkingDefault: thinking is on unless the server's default turns it
// off; a request's own choice wins either way.
func TestThinkingDefault(t *testing.T) {
	for _, tt := range []struct {
		disable bool
		kwargs  string
		want    string
	}{
		{false, ``, "<think>\n"},
		{true, ``, "<think>\n\n</think>\n\n"},
		{true, `,"chat_template_kwargs":{"enable_thinking":true}`, "<think>\n"},
		{false, `,"reasoning_effort":"none"`, "<think>\n\n</think>\n\n"},
	} {
		h := start(t, server.Config{DisableThinking: tt.disable})
		h.eng.say(h.f, "Fine.")
		resp, err := h.post(context.Background(), t, "/v1/chat/completions",
			`{"model":"`+modelID+`","messages":[{"role":"user","content":"Hi"}]`+tt.kwargs+`}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if p := h.eng.lastPrompt(t, h.f); !strings.HasSuffix(p, "<|im_start|>assistant\n"+tt.want) {
			t.Errorf("disable %v, kwargs %q: prompt ends %q", tt.disable, tt.kwargs, p[max(0, len(p)-40):])
		}
	}
}
