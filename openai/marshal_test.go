package openai

import (
	"fmt"
	"math"
	"testing"
)

// golden marshals v as the server sends it and compares it with want exactly.
func golden(t *testing.T, v any, want string) {
	t.Helper()
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// TestMarshalChatCompletion pins the non-streamed shapes: null content only
// with tool calls, reasoning_content and tool_calls omitted when empty,
// refusal and logprobs null.
func TestMarshalChatCompletion(t *testing.T) {
	u := NewUsage(10, 5, 4)
	golden(t, NewChatCompletion("chatcmpl-1", "qwen", 1700000000, NewChatMessage("Hello", "", nil), nil, FinishStop, u),
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"qwen","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4}},"system_fingerprint":"fp_aima"}`)
	calls := []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "get", Arguments: `{"city":"Oslo"}`}}}
	golden(t, NewChatMessage("", "I should call <get>", calls),
		`{"role":"assistant","content":null,"refusal":null,"reasoning_content":"I should call <get>","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}}]}`)
	golden(t, NewChatMessage("", "", nil), `{"role":"assistant","content":"","refusal":null}`)
	lp := &Logprobs{Content: []TokenLogprob{{Token: "Hi", Logprob: -0.25, Bytes: TokenBytes([]byte("Hi")),
		TopLogprobs: []TopLogprob{{Token: "Hi", Logprob: -0.25, Bytes: []int{72, 105}}, {Token: "Yo", Logprob: math.Inf(-1), Bytes: []int{89, 111}}}},
		{Token: "!", Logprob: -1, Bytes: []int{33}}}}
	golden(t, lp, `{"content":[{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.25,"bytes":[72,105]},{"token":"Yo","logprob":-9999,"bytes":[89,111]}]},`+
		`{"token":"!","logprob":-1,"bytes":[33],"top_logprobs":[]}],"refusal":null}`)
	u.CompletionTokensDetails = &CompletionTokensDetails{ReasoningTokens: 3}
	golden(t, u, `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}`)
}

// TestMarshalChatChunks pins every chunk a stream sends.
func TestMarshalChatChunks(t *testing.T) {
	c := ChatChunker{ID: "chatcmpl-1", Model: "qwen", Created: 1700000000}
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"qwen","system_fingerprint":"fp_aima","choices":`
	tests := []struct {
		chunk ChatCompletionChunk
		want  string
	}{
		{c.Role(), `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{c.Reasoning("hmm", nil), `[{"index":0,"delta":{"reasoning_content":"hmm"},"logprobs":null,"finish_reason":null}]}`},
		{c.Content("Hi <b>", &Logprobs{Content: []TokenLogprob{{Token: "Hi", Logprob: -0.5, Bytes: []int{72, 105}}}}),
			`[{"index":0,"delta":{"content":"Hi <b>"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}`},
		{c.ToolCallStart(0, "call_1", "get"), `[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`},
		{c.ToolCallArguments(0, `{"city":`), `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"logprobs":null,"finish_reason":null}]}`},
		{c.Finish(FinishToolCalls), `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`},
		{c.Usage(NewUsage(3, 2, 0)), `[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":0}}}`},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) { golden(t, tt.chunk, head+tt.want) })
	}
}

// TestMarshalCompletion pins legacy completions, their chunks and logprobs.
func TestMarshalCompletion(t *testing.T) {
	lp := &CompletionLogprobs{
		Tokens:        []string{"Once", " upon"},
		TokenLogprobs: []*float64{nil, ptr(-0.5)},
		TopLogprobs:   []map[string]float64{nil, {" upon": -0.5, " a": math.Inf(-1)}},
		TextOffset:    []int{0, 4},
	}
	golden(t, NewCompletion("cmpl-1", "qwen", 1700000000, "Once upon", lp, FinishLength, NewUsage(1, 1, 0)),
		`{"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"qwen","system_fingerprint":"fp_aima","choices":[{"index":0,"text":"Once upon",`+
			`"logprobs":{"tokens":["Once"," upon"],"token_logprobs":[null,-0.5],"top_logprobs":[null,{" a":-9999," upon":-0.5}],"text_offset":[0,4]},"finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}`)
	golden(t, NewCompletionChunk("cmpl-1", "qwen", 1, " a", nil, ""),
		`{"id":"cmpl-1","object":"text_completion","created":1,"model":"qwen","system_fingerprint":"fp_aima","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null}]}`)
	golden(t, NewCompletionChunk("cmpl-1", "qwen", 1, "", nil, FinishStop),
		`{"id":"cmpl-1","object":"text_completion","created":1,"model":"qwen","system_fingerprint":"fp_aima","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"stop"}]}`)
	golden(t, NewCompletionUsageChunk("cmpl-1", "qwen", 1, NewUsage(1, 2, 1)),
		`{"id":"cmpl-1","object":"text_completion","created":1,"model":"qwen","system_fingerprint":"fp_aima","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}}`)
	golden(t, &CompletionLogprobs{}, `{"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]}`)
}

// TestMarshalToolChoice pins both forms of tool_choice.
func TestMarshalToolChoice(t *testing.T) {
	golden(t, ToolChoice{Mode: ToolChoiceFunction, Name: "f"}, `{"type":"function","function":{"name":"f"}}`)
	golden(t, ToolChoice{Mode: ToolChoiceRequired}, `"required"`)
	golden(t, ToolChoice{}, `"auto"`)
	golden(t, ResponsesToolChoice{Mode: ToolChoiceFunction, Name: "f"}, `{"type":"function","name":"f"}`)
	golden(t, ResponsesToolChoice{Mode: ToolChoiceNone}, `"none"`)
	golden(t, ResponsesToolChoice{}, `"auto"`)
}

// TestMarshalModels pins the model list.
func TestMarshalModels(t *testing.T) {
	golden(t, NewModelList(NewModelCard("qwen3.6-35b-a3b", "aima", 1700000000, 262144)),
		`{"object":"list","data":[{"id":"qwen3.6-35b-a3b","object":"model","created":1700000000,"owned_by":"aima","max_model_len":262144}]}`)
	golden(t, NewModelList(), `{"object":"list","data":[]}`)
}

// seqIDs is a deterministic id maker for builder tests.
func seqIDs() func(string) string {
	n := 0
	return func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
}

// TestMarshalResponse pins the response object, null members included.
func TestMarshalResponse(t *testing.T) {
	req, err := DecodeResponsesRequest([]byte(respBody(``)))
	if err != nil {
		t.Fatal(err)
	}
	b := NewResponseBuilder(NewResponse("resp_1", "qwen", 1700000000, req))
	b.NewID = seqIDs()
	b.Reasoning("think")
	b.Text("Hi")
	b.FunctionCall("call_1", "get")
	b.Arguments(`{"a":1}`)
	b.Finish(NewResponseUsage(7, 9, 0, 3), "")
	golden(t, b.Response(), `{"id":"resp_1","object":"response","created_at":1700000000,"status":"completed","error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"qwen",`+
		`"output":[{"id":"rs_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},`+
		`{"id":"msg_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]},`+
		`{"id":"fc_3","type":"function_call","status":"completed","call_id":"call_1","name":"get","arguments":"{\"a\":1}"}],`+
		`"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":true,"temperature":1,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled",`+
		`"usage":{"input_tokens":7,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":16},"metadata":{}}`)

	req, err = DecodeResponsesRequest([]byte(respBody(`,"instructions":"be brief","previous_response_id":"resp_0","max_output_tokens":5,"temperature":0,"top_p":0.5,"store":false,"parallel_tool_calls":false,` +
		`"reasoning":{"effort":"low","summary":"auto"},"metadata":{"k":"v"},"tools":[{"type":"function","name":"get","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"get"}`)))
	if err != nil {
		t.Fatal(err)
	}
	b = NewResponseBuilder(NewResponse("resp_2", "qwen", 1, req))
	b.NewID = seqIDs()
	b.Text("cut")
	b.Finish(NewResponseUsage(1, 5, 1, 0), "max_output_tokens")
	golden(t, b.Response(), `{"id":"resp_2","object":"response","created_at":1,"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"},"instructions":"be brief","max_output_tokens":5,"model":"qwen",`+
		`"output":[{"id":"msg_1","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"cut","annotations":[]}]}],`+
		`"parallel_tool_calls":false,"previous_response_id":"resp_0","reasoning":{"effort":"low","summary":"auto"},"store":false,"temperature":0,"text":{"format":{"type":"text"}},"tool_choice":{"type":"function","name":"get"},`+
		`"tools":[{"type":"function","name":"get","parameters":{"type":"object"}}],"top_p":0.5,"truncation":"disabled",`+
		`"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":1},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6},"metadata":{"k":"v"}}`)
}

// TestResponseEvents pins the event sequence of a streamed response and the
// full form of each kind of event.
func TestResponseEvents(t *testing.T) {
	req, _ := DecodeResponsesRequest([]byte(respBody(``)))
	b := NewResponseBuilder(NewResponse("resp_1", "qwen", 1, req))
	b.NewID = seqIDs()
	var events []ResponseEvent
	add := func(e []ResponseEvent) { events = append(events, e...) }
	add(b.Start())
	add(b.Reasoning("a"))
	add(b.Reasoning(""))
	add(b.Reasoning("b"))
	add(b.Text("Hi"))
	add(b.Arguments("ignored: no call is open"))
	add(b.FunctionCall("call_1", "get"))
	add(b.Arguments(`{}`))
	add(b.Finish(NewResponseUsage(1, 2, 0, 1), ""))
	var types []string
	for i, e := range events {
		if e.SequenceNumber != i {
			t.Errorf("event %d has sequence_number %d", i, e.SequenceNumber)
		}
		types = append(types, e.Type)
	}
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("\n got %v\nwant %v", types, want)
	}
	goldens := map[int]string{
		2:  `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"content":[]}}`,
		3:  `{"type":"response.content_part.added","sequence_number":3,"output_index":0,"item_id":"rs_1","content_index":0,"part":{"type":"reasoning_text","text":""}}`,
		5:  `{"type":"response.reasoning_text.delta","sequence_number":5,"output_index":0,"item_id":"rs_1","content_index":0,"delta":"b"}`,
		6:  `{"type":"response.reasoning_text.done","sequence_number":6,"output_index":0,"item_id":"rs_1","content_index":0,"text":"ab"}`,
		9:  `{"type":"response.output_item.added","sequence_number":9,"output_index":1,"item":{"id":"msg_2","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		10: `{"type":"response.content_part.added","sequence_number":10,"output_index":1,"item_id":"msg_2","content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`,
		11: `{"type":"response.output_text.delta","sequence_number":11,"output_index":1,"item_id":"msg_2","content_index":0,"delta":"Hi","logprobs":[]}`,
		12: `{"type":"response.output_text.done","sequence_number":12,"output_index":1,"item_id":"msg_2","content_index":0,"text":"Hi","logprobs":[]}`,
		13: `{"type":"response.content_part.done","sequence_number":13,"output_index":1,"item_id":"msg_2","content_index":0,"part":{"type":"output_text","text":"Hi","annotations":[]}}`,
		14: `{"type":"response.output_item.done","sequence_number":14,"output_index":1,"item":{"id":"msg_2","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}}`,
		15: `{"type":"response.output_item.added","sequence_number":15,"output_index":2,"item":{"id":"fc_3","type":"function_call","status":"in_progress","call_id":"call_1","name":"get","arguments":""}}`,
		16: `{"type":"response.function_call_arguments.delta","sequence_number":16,"output_index":2,"item_id":"fc_3","delta":"{}"}`,
		17: `{"type":"response.function_call_arguments.done","sequence_number":17,"output_index":2,"item_id":"fc_3","arguments":"{}"}`,
	}
	for i, want := range goldens {
		t.Run(fmt.Sprint(i), func(t *testing.T) { golden(t, events[i], want) })
	}
	if r := events[0].Response; r.Status != StatusInProgress || len(r.Output) != 0 || r.Usage != nil {
		t.Errorf("response.created carries %+v", r)
	}
	if r := events[len(events)-1].Response; r.Status != StatusCompleted || len(r.Output) != 3 || r.Usage == nil {
		t.Errorf("response.completed carries %+v", r)
	}
}

// TestResponseFail fails a response with an item open.
func TestResponseFail(t *testing.T) {
	req, _ := DecodeResponsesRequest([]byte(respBody(``)))
	b := NewResponseBuilder(NewResponse("resp_1", "qwen", 1, req))
	b.NewID = seqIDs()
	b.Start()
	b.Text("partial")
	events := b.Fail(RequestTimeout())
	last := events[len(events)-1]
	if last.Type != EventFailed || last.Response.Status != StatusFailed {
		t.Fatalf("last event %s %s", last.Type, last.Response.Status)
	}
	golden(t, last.Response.Error, `{"code":"request_timeout","message":"The request did not finish within its deadline."}`)
	if got := last.Response.Output[0].Status; got != StatusIncomplete {
		t.Errorf("open message status %q", got)
	}
}
