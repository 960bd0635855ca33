package openai

import (
	"encoding/json"
	"sort"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// These tests hold the wire format to the official Go client: what the
// server sends must decode into its types with no field misnamed, and what
// the client sends must decode here.

// extra lists the fields the client did not recognize.
func extra(fields map[string]respjson.Field) []string {
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// wire marshals v as the server sends it.
func wire(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClientReadsChatCompletion decodes our completions with openai-go.
func TestClientReadsChatCompletion(t *testing.T) {
	u := NewUsage(12, 4, 8)
	lp := &Logprobs{Content: []TokenLogprob{{Token: "Hi", Logprob: -0.1, Bytes: []int{72, 105}, TopLogprobs: []TopLogprob{{Token: "Hi", Logprob: -0.1, Bytes: []int{72, 105}}}}}}
	cc := NewChatCompletion("chatcmpl-1", "qwen", 1700000000, NewChatMessage("Hi", "greeting", nil), lp, FinishStop, u)
	var got oai.ChatCompletion
	if err := json.Unmarshal(wire(t, cc), &got); err != nil {
		t.Fatal(err)
	}
	ch := got.Choices[0]
	if got.ID != "chatcmpl-1" || got.Created != 1700000000 || got.Model != "qwen" || got.SystemFingerprint != "fp_aima" ||
		ch.Message.Content != "Hi" || ch.FinishReason != "stop" || ch.Logprobs.Content[0].TopLogprobs[0].Token != "Hi" ||
		got.Usage.PromptTokens != 12 || got.Usage.CompletionTokens != 4 || got.Usage.TotalTokens != 16 || got.Usage.PromptTokensDetails.CachedTokens != 8 {
		t.Errorf("decoded %+v", got)
	}
	if e := extra(got.JSON.ExtraFields); len(e) != 0 {
		t.Errorf("completion fields the client does not know: %v", e)
	}
	if e := extra(ch.JSON.ExtraFields); len(e) != 0 {
		t.Errorf("choice fields the client does not know: %v", e)
	}
	if e := extra(ch.Message.JSON.ExtraFields); len(e) != 1 || e[0] != "reasoning_content" {
		t.Errorf("message extra fields %v, want [reasoning_content]", e)
	}
	if r := ch.Message.JSON.ExtraFields["reasoning_content"].Raw(); r != `"greeting"` {
		t.Errorf("reasoning_content raw %s", r)
	}

	calls := []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "get", Arguments: `{"city":"Oslo"}`}}}
	cc = NewChatCompletion("chatcmpl-2", "qwen", 1, NewChatMessage("", "", calls), nil, FinishToolCalls, u)
	got = oai.ChatCompletion{}
	if err := json.Unmarshal(wire(t, cc), &got); err != nil {
		t.Fatal(err)
	}
	call, ok := got.Choices[0].Message.ToolCalls[0].AsAny().(oai.ChatCompletionMessageFunctionToolCall)
	if !ok || call.ID != "call_1" || call.Function.Name != "get" || call.Function.Arguments != `{"city":"Oslo"}` || got.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool call %+v", got.Choices[0].Message)
	}
	if got.Choices[0].Message.JSON.Content.Valid() {
		t.Errorf("content should be null")
	}

	// The client sends the message back (ToParam) in the next request.
	params := oai.ChatCompletionNewParams{
		Model: "qwen",
		Messages: []oai.ChatCompletionMessageParamUnion{
			oai.SystemMessage("be brief"), oai.UserMessage("weather in Oslo?"),
			got.Choices[0].Message.ToParam(), oai.ToolMessage("sunny", "call_1"),
		},
		Tools: []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get", Description: oai.String("weather"), Strict: oai.Bool(true),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})},
		ToolChoice:          oai.ToolChoiceOptionFunctionToolChoice(oai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get"}),
		Temperature:         oai.Float(0.7),
		TopP:                oai.Float(0.9),
		MaxCompletionTokens: oai.Int(100),
		Seed:                oai.Int(42),
		N:                   oai.Int(1),
		Stop:                oai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}},
		Logprobs:            oai.Bool(true),
		TopLogprobs:         oai.Int(3),
		ParallelToolCalls:   oai.Bool(false),
		ReasoningEffort:     shared.ReasoningEffortLow,
		User:                oai.String("u"),
		Store:               oai.Bool(false),
		Metadata:            shared.Metadata{"k": "v"},
	}
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	r, derr := DecodeChatRequest(body)
	if derr != nil {
		t.Fatalf("%v\n%s", derr, body)
	}
	if len(r.Messages) != 4 || r.Messages[2].ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` || r.Tools[0].Function.Name != "get" ||
		r.ToolChoice.Name != "get" || *r.MaxCompletionTokens != 100 || *r.Seed != 42 || *r.TopLogprobs != 3 || *r.ReasoningEffort != "low" {
		t.Errorf("decoded %+v", r)
	}
	if _, err := r.TemplateMessages(); err != nil {
		t.Error(err)
	}
}

// TestClientAccumulatesChunks streams our chunks into openai-go's
// accumulator and gets back the message the non-streamed form carries.
func TestClientAccumulatesChunks(t *testing.T) {
	c := ChatChunker{ID: "chatcmpl-1", Model: "qwen", Created: 1}
	chunks := []ChatCompletionChunk{
		c.Role(), c.Reasoning("think", nil), c.Content("Let me ", nil), c.Content("check.", nil),
		c.ToolCallStart(0, "call_1", "get"), c.ToolCallArguments(0, `{"city":`), c.ToolCallArguments(0, `"Oslo"}`),
		c.ToolCallStart(1, "call_2", "time"), c.ToolCallArguments(1, `{}`),
		c.Finish(FinishToolCalls), c.Usage(NewUsage(5, 9, 2)),
	}
	var acc oai.ChatCompletionAccumulator
	for i, ch := range chunks {
		var got oai.ChatCompletionChunk
		if err := json.Unmarshal(wire(t, ch), &got); err != nil {
			t.Fatal(err)
		}
		if e := extra(got.JSON.ExtraFields); len(e) != 0 {
			t.Errorf("chunk %d fields the client does not know: %v", i, e)
		}
		if !acc.AddChunk(got) {
			t.Fatalf("accumulator refused chunk %d: %s", i, wire(t, ch))
		}
	}
	m := acc.Choices[0].Message
	if m.Content != "Let me check." || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID != "call_1" || m.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` ||
		m.ToolCalls[1].Function.Name != "time" || acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens != 14 || acc.Usage.PromptTokensDetails.CachedTokens != 2 {
		t.Errorf("accumulated %+v usage %+v", acc.Choices[0], acc.Usage)
	}
}

// TestClientReadsCompletionAndModels decodes legacy completions and the model
// list.
func TestClientReadsCompletionAndModels(t *testing.T) {
	lp := &CompletionLogprobs{Tokens: []string{"a"}, TokenLogprobs: []*float64{ptr(-0.5)}, TopLogprobs: []map[string]float64{{"a": -0.5}}, TextOffset: []int{0}}
	var got oai.Completion
	if err := json.Unmarshal(wire(t, NewCompletion("cmpl-1", "qwen", 1, "a", lp, FinishLength, NewUsage(1, 1, 0))), &got); err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != "a" || got.Choices[0].FinishReason != "length" || got.Choices[0].Logprobs.TopLogprobs[0]["a"] != -0.5 || got.Usage.TotalTokens != 2 {
		t.Errorf("decoded %+v", got)
	}
	if e := extra(got.JSON.ExtraFields); len(e) != 0 {
		t.Errorf("completion fields the client does not know: %v", e)
	}
	body, err := json.Marshal(oai.CompletionNewParams{
		Model: "qwen", Prompt: oai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 2}},
		MaxTokens: oai.Int(8), Echo: oai.Bool(true), Logprobs: oai.Int(2), Stop: oai.CompletionNewParamsStopUnion{OfString: oai.String("\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := DecodeCompletionRequest(body); err != nil || len(r.Prompt.Tokens) != 2 || !r.Echo {
		t.Errorf("decode %s: %v %+v", body, err, r)
	}

	var list struct {
		Object string      `json:"object"`
		Data   []oai.Model `json:"data"`
	}
	if err := json.Unmarshal(wire(t, NewModelList(NewModelCard("qwen", "aima", 5, 4096))), &list); err != nil {
		t.Fatal(err)
	}
	if list.Object != "list" || list.Data[0].ID != "qwen" || list.Data[0].OwnedBy != "aima" || list.Data[0].Created != 5 {
		t.Errorf("models %+v", list)
	}
	if e := extra(list.Data[0].JSON.ExtraFields); len(e) != 1 || e[0] != "max_model_len" {
		t.Errorf("model extra fields %v", e)
	}
}

// TestClientReadsResponses decodes our response and every stream event with
// openai-go, then sends the output back as the next request's input.
func TestClientReadsResponses(t *testing.T) {
	req, derr := DecodeResponsesRequest([]byte(respBody(`,"instructions":"i","tools":[{"type":"function","name":"get","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`)))
	if derr != nil {
		t.Fatal(derr)
	}
	b := NewResponseBuilder(NewResponse("resp_1", "qwen", 1700000000, req))
	var events []ResponseEvent
	add := func(e []ResponseEvent) { events = append(events, e...) }
	add(b.Start())
	add(b.Reasoning("need weather"))
	add(b.Text("Checking."))
	add(b.FunctionCall("call_1", "get"))
	add(b.Arguments(`{"city":`))
	add(b.Arguments(`"Oslo"}`))
	add(b.Finish(NewResponseUsage(20, 10, 4, 3), ""))

	var resp responses.Response
	if err := json.Unmarshal(wire(t, b.Response()), &resp); err != nil {
		t.Fatal(err)
	}
	// OpenAI's responses carry store, which the client's type leaves out.
	if e := extra(resp.JSON.ExtraFields); len(e) != 1 || e[0] != "store" {
		t.Errorf("response fields the client does not know: %v, want [store]", e)
	}
	if resp.ID != "resp_1" || resp.Status != "completed" || resp.OutputText() != "Checking." || resp.Usage.InputTokens != 20 ||
		resp.Usage.InputTokensDetails.CachedTokens != 4 || resp.Usage.OutputTokensDetails.ReasoningTokens != 3 || resp.Instructions.OfString != "i" ||
		resp.Tools[0].Name != "get" || resp.ToolChoice.OfToolChoiceMode != "auto" || resp.Text.Format.Type != "text" {
		t.Errorf("decoded %+v", resp)
	}
	reasoning, ok := resp.Output[0].AsAny().(responses.ResponseReasoningItem)
	if !ok || reasoning.Content[0].Text != "need weather" || reasoning.Content[0].Type != "reasoning_text" {
		t.Errorf("reasoning %+v", resp.Output[0])
	}
	msg, ok := resp.Output[1].AsAny().(responses.ResponseOutputMessage)
	if !ok || msg.Status != "completed" || msg.Content[0].Text != "Checking." {
		t.Errorf("message %+v", resp.Output[1])
	}
	call, ok := resp.Output[2].AsAny().(responses.ResponseFunctionToolCall)
	if !ok || call.CallID != "call_1" || call.Name != "get" || call.Arguments != `{"city":"Oslo"}` || call.Status != "completed" {
		t.Errorf("call %+v", resp.Output[2])
	}
	for i, fields := range []map[string]respjson.Field{reasoning.JSON.ExtraFields, msg.JSON.ExtraFields, call.JSON.ExtraFields, msg.Content[0].AsOutputText().JSON.ExtraFields} {
		if e := extra(fields); len(e) != 0 {
			t.Errorf("output %d fields the client does not know: %v", i, e)
		}
	}

	// Replay the stream through the client's event types.
	var text, args, reasoningText string
	for i, e := range events {
		var ev responses.ResponseStreamEventUnion
		if err := json.Unmarshal(wire(t, e), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.SequenceNumber != int64(i) {
			t.Errorf("event %d sequence %d", i, ev.SequenceNumber)
		}
		var fields map[string]respjson.Field
		switch v := ev.AsAny().(type) {
		case responses.ResponseCreatedEvent:
			fields = v.JSON.ExtraFields
			if v.Response.Status != "in_progress" {
				t.Errorf("created status %s", v.Response.Status)
			}
		case responses.ResponseInProgressEvent:
			fields = v.JSON.ExtraFields
		case responses.ResponseCompletedEvent:
			fields = v.JSON.ExtraFields
			if v.Response.OutputText() != "Checking." {
				t.Errorf("completed output %q", v.Response.OutputText())
			}
		case responses.ResponseOutputItemAddedEvent:
			fields = v.JSON.ExtraFields
		case responses.ResponseOutputItemDoneEvent:
			fields = v.JSON.ExtraFields
		case responses.ResponseContentPartAddedEvent:
			fields = v.JSON.ExtraFields
		case responses.ResponseContentPartDoneEvent:
			fields = v.JSON.ExtraFields
		case responses.ResponseTextDeltaEvent:
			fields = v.JSON.ExtraFields
			text += v.Delta
			if !v.JSON.Logprobs.Valid() {
				t.Errorf("output_text.delta lacks logprobs")
			}
		case responses.ResponseTextDoneEvent:
			fields = v.JSON.ExtraFields
			if v.Text != text {
				t.Errorf("output_text.done %q, deltas %q", v.Text, text)
			}
		case responses.ResponseReasoningTextDeltaEvent:
			fields = v.JSON.ExtraFields
			reasoningText += v.Delta
		case responses.ResponseReasoningTextDoneEvent:
			fields = v.JSON.ExtraFields
			if v.Text != reasoningText {
				t.Errorf("reasoning_text.done %q, deltas %q", v.Text, reasoningText)
			}
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			fields = v.JSON.ExtraFields
			args += v.Delta
		case responses.ResponseFunctionCallArgumentsDoneEvent:
			fields = v.JSON.ExtraFields
			if v.Arguments != args || v.ItemID != call.ID {
				t.Errorf("arguments.done %+v, deltas %q", v, args)
			}
		default:
			t.Errorf("event %d: the client does not know %s", i, ev.Type)
		}
		if e := extra(fields); len(e) != 0 {
			t.Errorf("%s fields the client does not know: %v", ev.Type, e)
		}
	}

	// The client continues from the output: its items become input items.
	params := responses.ResponseNewParams{
		Model: "qwen",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("weather in Oslo?", responses.EasyInputMessageRoleUser),
			{OfReasoning: ptr(reasoning.ToParam())},
			{OfOutputMessage: ptr(msg.ToParam())},
			{OfFunctionCall: ptr(call.ToParam())},
			responses.ResponseInputItemParamOfFunctionCallOutput("sunny"),
		}},
		Instructions:    oai.String("be brief"),
		MaxOutputTokens: oai.Int(50),
		Temperature:     oai.Float(0.5),
		Store:           oai.Bool(true),
		Reasoning:       shared.ReasoningParam{Effort: shared.ReasoningEffortNone},
		Tools:           []responses.ToolUnionParam{responses.ToolParamOfFunction("get", map[string]any{"type": "object"}, true)},
		ToolChoice:      responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: oai.Opt(responses.ToolChoiceOptionsAuto)},
	}
	params.Input.OfInputItemList[4].OfFunctionCallOutput.CallID = oai.String("call_1")
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	r, derr := DecodeResponsesRequest(body)
	if derr != nil {
		t.Fatalf("%v\n%s", derr, body)
	}
	msgs, tools, derr := r.ToChat(nil)
	if derr != nil {
		t.Fatal(derr)
	}
	tm, derr := TemplateMessages(msgs)
	if derr != nil {
		t.Fatal(derr)
	}
	want := `[{"role":"system","content":"be brief"},{"role":"user","content":"weather in Oslo?"},` +
		`{"role":"assistant","content":"Checking.","reasoning_content":"need weather","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":{"city":"Oslo"}}}]},` +
		`{"role":"tool","content":"sunny","tool_call_id":"call_1"}]`
	if string(tm) != want {
		t.Errorf("\n got %s\nwant %s", tm, want)
	}
	if len(tools) != 1 || tools[0].Function.Name != "get" || r.EnableThinking() == nil || *r.EnableThinking() {
		t.Errorf("tools %+v thinking %v", tools, r.EnableThinking())
	}
}
