package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aimaproject/aimac/server"
)

// outputSummary is a response's output in a comparable form (item ids
// differ per request).
type outputSummary struct {
	Status    string
	Reasoning string
	Text      string
	Calls     []call
	Input     int64
	Output    int64
}

func summarize(t testing.TB, r *responses.Response) outputSummary {
	t.Helper()
	s := outputSummary{Status: string(r.Status), Text: r.OutputText(), Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens}
	for _, it := range r.Output {
		switch v := it.AsAny().(type) {
		case responses.ResponseReasoningItem:
			for _, c := range v.Content {
				s.Reasoning += c.Text
			}
		case responses.ResponseFunctionToolCall:
			if !strings.HasPrefix(v.CallID, "call_") || !strings.HasPrefix(v.ID, "fc_") {
				t.Errorf("function call ids %q %q", v.ID, v.CallID)
			}
			s.Calls = append(s.Calls, call{v.Name, v.Arguments})
		case responses.ResponseOutputMessage:
		default:
			t.Errorf("unexpected output item %s", it.Type)
		}
	}
	return s
}

// fromResponseStream reads a Responses event stream: numbered in order,
// created and in_progress first, completed (or incomplete) last, the deltas
// adding up to the final response.
func fromResponseStream(t testing.TB, s *ssestream.Stream[responses.ResponseStreamEventUnion]) (*responses.Response, []string) {
	t.Helper()
	var types []string
	var final *responses.Response
	var text, reasoning, args string
	for s.Next() {
		e := s.Current()
		if e.SequenceNumber != int64(len(types)) {
			t.Errorf("event %d has sequence number %d", len(types), e.SequenceNumber)
		}
		types = append(types, e.Type)
		switch v := e.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			text += v.Delta
		case responses.ResponseReasoningTextDeltaEvent:
			reasoning += v.Delta
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			args += v.Delta
		case responses.ResponseCompletedEvent:
			final = &v.Response
		case responses.ResponseIncompleteEvent:
			final = &v.Response
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" || final == nil ||
		!strings.HasPrefix(types[len(types)-1], "response.") {
		t.Fatalf("events %v", types)
	}
	got := summarize(t, final)
	var callArgs string
	for _, c := range got.Calls {
		callArgs += c.Arguments
	}
	if got.Text != text || got.Reasoning != reasoning || callArgs != args {
		t.Errorf("deltas (%q, %q, %q) do not add up to the response (%q, %q, %q)", text, reasoning, args, got.Text, got.Reasoning, callArgs)
	}
	return final, types
}

// TestResponses runs the Responses API: a conversation continued with
// previous_response_id, the store's GET and DELETE, streaming, and a
// function call answered with its output.
func TestResponses(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	noStore := responses.ResponseGetParams{}

	h.eng.say(h.f, "Greeting.\n</think>\n\nHello, I am tiny.")
	first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID,
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Who are you?")}, Instructions: oai.String("Be brief.")})
	if err != nil {
		t.Fatal(err)
	}
	want := outputSummary{Status: "completed", Reasoning: "Greeting.", Text: "Hello, I am tiny.",
		Input: int64(len(h.f.tok.Encode(h.eng.lastPrompt(t, h.f)))), Output: int64(len(h.f.tok.Encode("Greeting.\n</think>\n\nHello, I am tiny."))) + 1}
	if diff := cmp.Diff(want, summarize(t, first)); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(first.ID, "resp_") || first.Model != modelID || first.Instructions.OfString != "Be brief." {
		t.Errorf("first %s", first.RawJSON())
	}
	if first.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Error("no reasoning tokens counted")
	}

	// The follow-up sees the first exchange; the instructions are not
	// carried over.
	h.eng.say(h.f, "Again.\n</think>\n\nStill tiny.")
	second, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, PreviousResponseID: oai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Really?")}})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Still tiny." || second.PreviousResponseID != first.ID {
		t.Errorf("second %s", second.RawJSON())
	}
	prompt := h.eng.lastPrompt(t, h.f)
	if want := "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\nHello, I am tiny.<|im_end|>\n<|im_start|>user\nReally?<|im_end|>\n"; !strings.Contains(prompt, want) {
		t.Errorf("the follow-up prompt lacks the first exchange:\n%s", prompt)
	}
	if strings.Contains(prompt, "Be brief.") {
		t.Errorf("the instructions were carried over:\n%s", prompt)
	}

	// GET returns the stored response; DELETE removes it.
	got, err := c.Responses.Get(ctx, first.ID, noStore)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(summarize(t, first), summarize(t, got)); diff != "" || got.ID != first.ID {
		t.Errorf("stored (-created +got):\n%s", diff)
	}
	if err := c.Responses.Delete(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	var apiErr *oai.Error
	if _, err := c.Responses.Get(ctx, first.ID, noStore); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("GET after DELETE: %v", err)
	}
	if err := c.Responses.Delete(ctx, first.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("second DELETE: %v", err)
	}
	// The second response still continues: it holds its whole conversation.
	h.eng.say(h.f, "Third.")
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, PreviousResponseID: oai.String(second.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Once more")}}); err != nil {
		t.Fatal(err)
	}
	if p := h.eng.lastPrompt(t, h.f); !strings.Contains(p, "Who are you?") || !strings.Contains(p, "Still tiny.") {
		t.Errorf("the third prompt lost the conversation:\n%s", p)
	}

	// Not stored: nothing to GET or continue.
	h.eng.say(h.f, "Ephemeral.")
	eph, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, Store: oai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx, eph.ID, noStore); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("GET of an unstored response: %v", err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, PreviousResponseID: oai.String(eph.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "previous_response_id" {
		t.Errorf("continuing an unstored response: %v", err)
	}
}

// TestResponsesStreaming checks that streamed and non-streamed responses
// agree, with reasoning, text and function calls, and that the streamed
// one is stored too.
func TestResponsesStreaming(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	weather := responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}, "zip": map[string]any{"type": "string"}}}, false)
	for _, tc := range []struct {
		name   string
		script string
		params responses.ResponseNewParams
		want   outputSummary
		last   string
	}{{
		name:   "reasoning and text",
		script: "Let me think.\n</think>\n\nThe answer is 42.",
		want:   outputSummary{Status: "completed", Reasoning: "Let me think.", Text: "The answer is 42."},
		last:   "response.completed",
	}, {
		name:   "function call",
		script: "Need data.\n</think>\n\nChecking.\n\n" + weatherCall,
		params: responses.ResponseNewParams{Tools: []responses.ToolUnionParam{weather}},
		want: outputSummary{Status: "completed", Reasoning: "Need data.", Text: "Checking.",
			Calls: []call{{"get_weather", `{"city": "Paris", "days": 3, "zip": "75001"}`}}},
		last: "response.completed",
	}, {
		name:   "tool_choice required",
		script: "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
		params: responses.ResponseNewParams{Tools: []responses.ToolUnionParam{weather},
			ToolChoice: responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsRequired)}},
		want: outputSummary{Status: "completed", Calls: []call{{"get_weather", `{"city": "Rome"}`}}},
		last: "response.completed",
	}, {
		name:   "max_output_tokens",
		script: "A very long line of reasoning that never ends.",
		params: responses.ResponseNewParams{MaxOutputTokens: oai.Int(4)},
		want:   outputSummary{Status: "incomplete", Reasoning: decodeFirst(t, h, "A very long line of reasoning that never ends.", 4)},
		last:   "response.incomplete",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h.eng.say(h.f, tc.script)
			p := tc.params
			p.Model = modelID
			p.Input = responses.ResponseNewParamsInputUnion{OfString: oai.String("Question?")}
			res, err := c.Responses.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(t, res)
			want := tc.want
			want.Input, want.Output = got.Input, got.Output
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tc.want.Status == "incomplete" && res.IncompleteDetails.Reason != "max_output_tokens" {
				t.Errorf("incomplete_details %s", res.IncompleteDetails.RawJSON())
			}
			final, types := fromResponseStream(t, c.Responses.NewStreaming(ctx, p))
			if diff := cmp.Diff(got, summarize(t, final)); diff != "" {
				t.Errorf("streamed (-non-streamed +streamed):\n%s", diff)
			}
			if types[len(types)-1] != tc.last {
				t.Errorf("last event %s, want %s", types[len(types)-1], tc.last)
			}
			stored, err := c.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, summarize(t, stored)); diff != "" {
				t.Errorf("stored streamed response (-non-streamed +stored):\n%s", diff)
			}
		})
	}

	// A function call answered with its output continues the conversation.
	h.eng.say(h.f, "Need data.\n</think>\n\n"+weatherCall)
	first, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, Tools: []responses.ToolUnionParam{weather},
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("Weather in Paris?")}})
	if err != nil {
		t.Fatal(err)
	}
	fc, ok := first.Output[len(first.Output)-1].AsAny().(responses.ResponseFunctionToolCall)
	if !ok {
		t.Fatalf("output %s", first.RawJSON())
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`)
	out.OfFunctionCallOutput.CallID = oai.String(fc.CallID)
	h.eng.say(h.f, "Done.\n</think>\n\nClear skies.")
	second, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelID, Tools: []responses.ToolUnionParam{weather},
		PreviousResponseID: oai.String(first.ID), Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{out}}})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "Clear skies." {
		t.Errorf("second output %q", second.OutputText())
	}
	prompt := h.eng.lastPrompt(t, h.f)
	for _, want := range []string{"<function=get_weather>\n<parameter=city>\nParis\n</parameter>", "<tool_response>\n{\"sky\":\"clear\"}\n</tool_response>"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, prompt)
		}
	}
}

// TestResponsesWire checks the raw stream: named events whose data names
// the same type.
func TestResponsesWire(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	h.eng.say(h.f, "Hm.\n</think>\n\nOK.")
	evs := h.stream(t, "/v1/responses", map[string]any{"model": modelID, "input": "hi", "stream": true})
	for i, e := range evs {
		var d struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(e.data), &d); err != nil || d.Type != e.name || e.name == "" {
			t.Errorf("event %d: name %q, data type %q (%v)", i, e.name, d.Type, err)
		}
	}
}
