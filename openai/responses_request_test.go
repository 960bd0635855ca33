package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// respBody wraps extra members into a valid Responses request.
func respBody(extra string) string { return `{"model":"m","input":"hi"` + extra + `}` }

// itemsBody is a Responses request with the given input items.
func itemsBody(items, extra string) string { return `{"model":"m","input":` + items + extra + `}` }

// TestResponsesDecode checks what valid requests decode to.
func TestResponsesDecode(t *testing.T) {
	tests := []struct {
		name, body string
		want       ResponsesRequest
	}{
		{"string input", respBody(``), ResponsesRequest{Model: "m", Input: ResponsesInput{Text: ptr("hi")}}},
		{"options", respBody(`,"instructions":"be brief","previous_response_id":"resp_1","max_output_tokens":64,"temperature":0.2,"top_p":0.9,"stream":true,` +
			`"stream_options":{"include_obfuscation":false},"store":false,"reasoning":{"effort":"low","summary":"auto"},"text":{"format":{"type":"text"},"verbosity":null},` +
			`"metadata":{"a":"b"},"parallel_tool_calls":false,"user":"u","truncation":"disabled","background":false,"include":[],"service_tier":"auto","top_logprobs":0,` +
			`"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"}`),
			ResponsesRequest{Model: "m", Input: ResponsesInput{Text: ptr("hi")}, Instructions: "be brief", PreviousResponseID: "resp_1",
				MaxOutputTokens: ptr(64), Sampling: Sampling{Temperature: ptr(0.2), TopP: ptr(0.9)}, Stream: true, Store: ptr(false),
				Reasoning: &ReasoningConfig{Effort: "low", Summary: "auto"}, Text: &TextConfig{Format: &TextFormat{Type: "text"}},
				Metadata: json.RawMessage(`{"a":"b"}`), ParallelToolCalls: ptr(false), User: "u",
				Tools:      []ResponsesTool{{Type: "function", Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`), Strict: ptr(true)}},
				ToolChoice: &ResponsesToolChoice{Mode: "function", Name: "f"}}},
		{"items", itemsBody(`[{"role":"user","content":"q"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},`+
			`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"r"}],"encrypted_content":null},`+
			`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"ans","annotations":[],"logprobs":[]}]},`+
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}","status":"completed"},`+
			`{"type":"function_call_output","call_id":"call_1","output":"42"}]`, `,"tool_choice":"auto"`),
			ResponsesRequest{Model: "m", ToolChoice: &ResponsesToolChoice{Mode: "auto"}, Input: ResponsesInput{Items: []ResponsesItem{
				{Type: "message", Role: "user", Content: TextContent("q")},
				{Type: "message", Role: "user", Content: Content{Parts: []ContentPart{{Type: "input_text", Text: "a"}, {Type: "input_text", Text: "b"}}}},
				{Type: "reasoning", ID: "rs_1", Summary: []ContentPart{{Type: "summary_text", Text: "s"}}, Content: Content{Parts: []ContentPart{{Type: "reasoning_text", Text: "r"}}}},
				{Type: "message", ID: "msg_1", Status: "completed", Role: "assistant", Content: Content{Parts: []ContentPart{{Type: "output_text", Text: "ans"}}}},
				{Type: "function_call", ID: "fc_1", Status: "completed", CallID: "call_1", Name: "f", Arguments: "{}"},
				{Type: "function_call_output", CallID: "call_1", Output: TextContent("42")},
			}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeResponsesRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestResponsesValidation holds each rule to its code and param.
func TestResponsesValidation(t *testing.T) {
	tests := []struct {
		name, body string
		want       wantErr
	}{
		{"model missing", `{"input":"hi"}`, wantErr{"invalid_request", "model", "required"}},
		{"input missing", `{"model":"m"}`, wantErr{"invalid_request", "input", "required"}},
		{"input empty list", `{"model":"m","input":[]}`, wantErr{"invalid_request", "input", "must not be empty"}},
		{"input number", `{"model":"m","input":1}`, wantErr{"invalid_request", "input", "a string or an array of items"}},
		{"item no type", itemsBody(`[{"content":"q"}]`, ``), wantErr{"invalid_request", "input[0].type", "required"}},
		{"item reference", itemsBody(`[{"type":"item_reference","id":"x"}]`, ``), wantErr{"unsupported_parameter", "input[0].type", "'item_reference'"}},
		{"item web search", itemsBody(`[{"type":"web_search_call","id":"x"}]`, ``), wantErr{"unsupported_parameter", "input[0].type", "not supported"}},
		{"message no role", itemsBody(`[{"type":"message","content":"q"}]`, ``), wantErr{"invalid_request", "input[0].role", "required"}},
		{"message bad role", itemsBody(`[{"role":"tool","content":"q"}]`, ``), wantErr{"invalid_request", "input[0].role", "Invalid role 'tool'"}},
		{"message no content", itemsBody(`[{"role":"user"}]`, ``), wantErr{"invalid_request", "input[0].content", "required"}},
		{"message image", itemsBody(`[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]`, ``), wantErr{"unsupported_parameter", "input[0].content[0].type", "images"}},
		{"message annotations", itemsBody(`[{"role":"assistant","content":[{"type":"output_text","text":"a","annotations":[{"type":"url_citation"}]}]}]`, ``), wantErr{"unsupported_parameter", "input[0].content[0].annotations", "plain text"}},
		{"message chat part", itemsBody(`[{"role":"user","content":[{"type":"text","text":"a"}]}]`, ``), wantErr{"invalid_request", "input[0].content[0].type", "Unknown content part type 'text'"}},
		{"message unknown key", itemsBody(`[{"role":"user","content":"q","call_id":"x"}]`, ``), wantErr{"unsupported_parameter", "input[0].call_id", "Unknown parameter"}},
		{"bad status", itemsBody(`[{"role":"user","content":"q","status":"done"}]`, ``), wantErr{"invalid_request", "input[0].status", "Invalid status"}},
		{"call no call_id", itemsBody(`[{"type":"function_call","name":"f","arguments":"{}"}]`, ``), wantErr{"invalid_request", "input[0].call_id", "required"}},
		{"call no name", itemsBody(`[{"type":"function_call","call_id":"c","arguments":"{}"}]`, ``), wantErr{"invalid_request", "input[0].name", "required"}},
		{"call bad arguments", itemsBody(`[{"type":"function_call","call_id":"c","name":"f","arguments":"1"}]`, ``), wantErr{"invalid_request", "input[0].arguments", "must encode a JSON object"}},
		{"output no call_id", itemsBody(`[{"type":"function_call_output","output":"x"}]`, ``), wantErr{"invalid_request", "input[0].call_id", "required"}},
		{"output missing", itemsBody(`[{"type":"function_call_output","call_id":"c"}]`, ``), wantErr{"invalid_request", "input[0].output", "required"}},
		{"reasoning string content", itemsBody(`[{"type":"reasoning","summary":[],"content":"r"}]`, ``), wantErr{"invalid_request", "input[0].content", "an array of reasoning_text parts"}},
		{"reasoning encrypted", itemsBody(`[{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}]`, ``), wantErr{"unsupported_parameter", "input[0].encrypted_content", "encrypted"}},
		{"tool hosted", respBody(`,"tools":[{"type":"web_search"}]`), wantErr{"unsupported_parameter", "tools[0].type", "'web_search'"}},
		{"tool chat form", respBody(`,"tools":[{"type":"function","function":{"name":"f"}}]`), wantErr{"unsupported_parameter", "tools[0].function", "Unknown parameter"}},
		{"tool bad name", respBody(`,"tools":[{"type":"function","name":"a b"}]`), wantErr{"invalid_request", "tools[0].name", "Invalid function name"}},
		{"tool dup name", respBody(`,"tools":[{"type":"function","name":"a"},{"type":"function","name":"a"}]`), wantErr{"invalid_request", "tools[1].name", "Duplicate"}},
		{"tool bad schema", respBody(`,"tools":[{"type":"function","name":"a","parameters":{"type":"array"}}]`), wantErr{"invalid_request", "tools[0].parameters.type", "type 'object'"}},
		{"tool_choice unknown", respBody(`,"tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","name":"b"}`), wantErr{"invalid_request", "tool_choice", "'b'"}},
		{"tool_choice chat form", respBody(`,"tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","function":{"name":"a"}}`), wantErr{"unsupported_parameter", "tool_choice.function", "Unknown"}},
		{"tool_choice hosted", respBody(`,"tool_choice":{"type":"file_search"}`), wantErr{"unsupported_parameter", "tool_choice.type", "'file_search'"}},
		{"max_output_tokens", respBody(`,"max_output_tokens":0`), wantErr{"invalid_request", "max_output_tokens", "at least 1"}},
		{"temperature", respBody(`,"temperature":2.1`), wantErr{"invalid_request", "temperature", "[0, 2]"}},
		{"top_p", respBody(`,"top_p":0`), wantErr{"invalid_request", "top_p", "(0, 1]"}},
		{"effort", respBody(`,"reasoning":{"effort":"extreme"}`), wantErr{"invalid_request", "reasoning.effort", "'extreme'"}},
		{"summary", respBody(`,"reasoning":{"summary":"long"}`), wantErr{"invalid_request", "reasoning.summary", "'long'"}},
		{"reasoning unknown", respBody(`,"reasoning":{"budget":5}`), wantErr{"unsupported_parameter", "reasoning.budget", "Unknown"}},
		{"json schema format without a schema", respBody(`,"text":{"format":{"type":"json_schema","name":"x"}}`), wantErr{"invalid_request", "text.format.schema", "required"}},
		{"json schema format with a bad name", respBody(`,"text":{"format":{"type":"json_schema","name":"a b","schema":{}}}`), wantErr{"invalid_request", "text.format.name", "Invalid schema name"}},
		{"json_object format takes no schema", respBody(`,"text":{"format":{"type":"json_object","schema":{}}}`), wantErr{"unsupported_parameter", "text.format.schema", "Unknown"}},
		{"format unknown key", respBody(`,"text":{"format":{"type":"text","x":1}}`), wantErr{"unsupported_parameter", "text.format.x", "Unknown"}},
		{"verbosity", respBody(`,"text":{"verbosity":"high"}`), wantErr{"unsupported_parameter", "text.verbosity", "verbosity"}},
		{"stream_options usage", respBody(`,"stream":true,"stream_options":{"include_usage":true}`), wantErr{"unsupported_parameter", "stream_options.include_usage", "Unknown"}},
		{"background", respBody(`,"background":true`), wantErr{"unsupported_parameter", "background", "background"}},
		{"conversation", respBody(`,"conversation":"conv_1"`), wantErr{"unsupported_parameter", "conversation", "previous_response_id"}},
		{"include", respBody(`,"include":["reasoning.encrypted_content"]`), wantErr{"unsupported_parameter", "include", "include"}},
		{"truncation", respBody(`,"truncation":"auto"`), wantErr{"unsupported_parameter", "truncation", "never truncated"}},
		{"top_logprobs", respBody(`,"top_logprobs":3`), wantErr{"unsupported_parameter", "top_logprobs", "log probabilities"}},
		{"metadata", respBody(`,"metadata":{"a":{}}`), wantErr{"invalid_request", "metadata.a", "must be a string"}},
		{"metadata too many", respBody(`,"metadata":{"a":"","b":"","c":"","d":"","e":"","f":"","g":"","h":"","i":"","j":"","k":"","l":"","m":"","n":"","o":"","p":"","q":""}`), wantErr{"invalid_request", "metadata", "at most 16"}},
		{"unknown", respBody(`,"temperature_2":1`), wantErr{"unsupported_parameter", "temperature_2", "Unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeResponsesRequest([]byte(tt.body))
			checkErr(t, err, &tt.want)
		})
	}
}

// TestResponsesToChat converts inputs and histories into chat messages.
func TestResponsesToChat(t *testing.T) {
	opts := cmp.Options{cmpopts.IgnoreUnexported(Tool{}), cmpopts.EquateEmpty()}
	history := []Message{
		{Role: "user", Content: TextContent("weather?")},
		{Role: "assistant", ReasoningContent: ptr("need tool"), ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: "get", Arguments: `{"city":"Oslo"}`}}}},
	}
	tests := []struct {
		name, body string
		history    []Message
		want       []Message
		tools      []Tool
	}{
		{"string input with instructions", respBody(`,"instructions":"be brief"`), nil,
			[]Message{{Role: "system", Content: TextContent("be brief")}, {Role: "user", Content: TextContent("hi")}}, nil},
		{"instructions join a leading system item", itemsBody(`[{"role":"developer","content":"d"},{"role":"system","content":[{"type":"input_text","text":"s"}]},{"role":"user","content":"q"}]`, `,"instructions":"i"`), nil,
			[]Message{{Role: "system", Content: TextContent("i\n\nd\n\ns")}, {Role: "user", Content: TextContent("q")}}, nil},
		{"assistant output gathers into one message", itemsBody(`[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},`+
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"s1"},{"type":"summary_text","text":"s2"}]},`+
			`{"role":"assistant","content":[{"type":"output_text","text":"x"},{"type":"output_text","text":"y"}]},`+
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"k\":1}"},{"type":"function_call","call_id":"c2","name":"g","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c1","output":"one"},{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"two"}]},`+
			`{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"r2"}]},{"role":"assistant","content":"done"},{"role":"assistant","content":"again"}]`,
			`,"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"k":{}}}},{"type":"function","name":"g","description":"G"}]`), nil,
			[]Message{
				{Role: "user", Content: Content{Parts: []ContentPart{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}},
				{Role: "assistant", ReasoningContent: ptr("s1\n\ns2"), Content: TextContent("xy"), ToolCalls: []ToolCall{
					{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"k":1}`}},
					{ID: "c2", Type: "function", Function: FunctionCall{Name: "g", Arguments: `{}`}}}},
				{Role: "tool", ToolCallID: "c1", Content: TextContent("one")},
				{Role: "tool", ToolCallID: "c2", Content: Content{Parts: []ContentPart{{Type: "text", Text: "two"}}}},
				{Role: "assistant", ReasoningContent: ptr("r2"), Content: TextContent("done")},
				{Role: "assistant", Content: TextContent("again")},
			},
			[]Tool{{Type: "function", Function: FunctionDef{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"k":{}}}`)}},
				{Type: "function", Function: FunctionDef{Name: "g", Description: "G"}}}},
		{"follow-up answers a stored call", itemsBody(`[{"type":"function_call_output","call_id":"call_1","output":"sunny"}]`, `,"previous_response_id":"resp_1","instructions":"i"`), history,
			[]Message{{Role: "system", Content: TextContent("i")}, history[0], history[1], {Role: "tool", ToolCallID: "call_1", Content: TextContent("sunny")}}, nil},
		{"reasoning after a call starts a new turn", itemsBody(`[{"role":"user","content":"q"},{"type":"function_call","call_id":"c","name":"f","arguments":""},{"type":"reasoning","summary":[{"type":"summary_text","text":"r"}]}]`, ``), nil,
			[]Message{{Role: "user", Content: TextContent("q")},
				{Role: "assistant", ToolCalls: []ToolCall{{ID: "c", Type: "function", Function: FunctionCall{Name: "f"}}}},
				{Role: "assistant", ReasoningContent: ptr("r")}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeResponsesRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			msgs, tools, err := r.ToChat(tt.history)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, msgs, opts); diff != "" {
				t.Errorf("messages (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.tools, tools, opts); diff != "" {
				t.Errorf("tools (-want +got)\n%s", diff)
			}
			if _, err := TemplateMessages(msgs); err != nil {
				t.Errorf("TemplateMessages: %v", err)
			}
		})
	}
}

// TestResponsesToChatErrors covers conversions the template could not render.
func TestResponsesToChatErrors(t *testing.T) {
	history := []Message{{Role: "user", Content: TextContent("q")}, {Role: "assistant", Content: TextContent("a")}}
	tests := []struct {
		name, body string
		history    []Message
		want       wantErr
	}{
		{"system after user", itemsBody(`[{"role":"user","content":"q"},{"role":"system","content":"s"}]`, ``), nil, wantErr{"invalid_request", "input[1].role", "system message must come before"}},
		{"system after history", itemsBody(`[{"role":"developer","content":"s"}]`, ``), history, wantErr{"invalid_request", "input[0].role", "developer message"}},
		{"output without call", itemsBody(`[{"role":"user","content":"q"},{"type":"function_call_output","call_id":"nope","output":"x"}]`, ``), history, wantErr{"invalid_request", "input[1].call_id", "'nope'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeResponsesRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = r.ToChat(tt.history)
			checkErr(t, err, &tt.want)
		})
	}
}

// TestResponsesConversationRoundTrip stores a turn as the server would and
// continues from it.
func TestResponsesConversationRoundTrip(t *testing.T) {
	r1, err := DecodeResponsesRequest([]byte(respBody(`,"instructions":"i"`)))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := r1.Conversation(nil)
	if err != nil {
		t.Fatal(err)
	}
	output := []OutputItem{
		{Type: OutputReasoning, ID: "rs_1", Content: []OutputContent{{Type: ContentReasoningText, Text: "think"}}},
		{Type: OutputMessage, ID: "msg_1", Status: StatusCompleted, Content: []OutputContent{{Type: ContentOutputText, Text: "let me check"}}},
		{Type: OutputFunctionCall, ID: "fc_1", Status: StatusCompleted, CallID: "call_9", Name: "f", Arguments: `{"a":1}`},
	}
	stored := append(conv, OutputMessages(output)...)
	want := []Message{
		{Role: "user", Content: TextContent("hi")},
		{Role: "assistant", ReasoningContent: ptr("think"), Content: TextContent("let me check"),
			ToolCalls: []ToolCall{{ID: "call_9", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"a":1}`}}}},
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored (-want +got)\n%s", diff)
	}
	r2, err := DecodeResponsesRequest([]byte(itemsBody(`[{"type":"function_call_output","call_id":"call_9","output":"ok"}]`, `,"previous_response_id":"resp_1"`)))
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, err := r2.ToChat(stored)
	if err != nil {
		t.Fatal(err)
	}
	got, err := TemplateMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `[{"role":"user","content":"hi"},{"role":"assistant","content":"let me check","reasoning_content":"think","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"ok","tool_call_id":"call_9"}]`
	if string(got) != wantJSON {
		t.Errorf("\n got %s\nwant %s", got, wantJSON)
	}
	if OutputMessages(nil) != nil {
		t.Error("empty output should give no message")
	}
	if e := r2.EnableThinking(); e != nil {
		t.Errorf("EnableThinking = %v", *e)
	}
	r3, _ := DecodeResponsesRequest([]byte(respBody(`,"reasoning":{"effort":"none"},"max_output_tokens":8,"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"}`)))
	if e := r3.EnableThinking(); e == nil || *e {
		t.Errorf("effort none: EnableThinking = %v", e)
	}
	n, set := r3.MaxNewTokens()
	if diff := cmp.Diff([]any{8, true, &ToolChoice{Mode: "function", Name: "f"}}, []any{n, set, r3.ChatToolChoice()}); diff != "" {
		t.Error(diff)
	}
	if n, set := r2.MaxNewTokens(); n != 0 || set || r2.ChatToolChoice() != nil {
		t.Errorf("defaults: %d %v %v", n, set, r2.ChatToolChoice())
	}
}
