package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// msgsBody is a chat request with the given messages array and extra members.
func msgsBody(msgs, extra string) string {
	return `{"model":"m","messages":` + msgs + extra + `}`
}

// toolF is a valid tools member with functions f and g.
const toolF = `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}},{"type":"function","function":{"name":"g"}}]`

// TestChatValidation holds every validation rule to its code and param.
func TestChatValidation(t *testing.T) {
	const q = `{"role":"user","content":"q"}`
	tests := []struct {
		name, body string
		want       wantErr
	}{
		// model and messages
		{"model missing", `{"messages":[` + q + `]}`, wantErr{"invalid_request", "model", "'model' is required"}},
		{"model empty", `{"model":"","messages":[` + q + `]}`, wantErr{"invalid_request", "model", "required"}},
		{"model null", `{"model":null,"messages":[` + q + `]}`, wantErr{"invalid_request", "model", "required"}},
		{"model number", `{"model":3,"messages":[` + q + `]}`, wantErr{"invalid_request", "model", "'model' must be a string, got a number"}},
		{"messages missing", `{"model":"m"}`, wantErr{"invalid_request", "messages", "at least one"}},
		{"messages empty", `{"model":"m","messages":[]}`, wantErr{"invalid_request", "messages", "at least one"}},
		{"messages object", `{"model":"m","messages":{}}`, wantErr{"invalid_request", "messages", "must be an array"}},
		{"message not object", msgsBody(`["hi"]`, ``), wantErr{"invalid_request", "messages[0]", "must be an object"}},
		// roles and per-role fields
		{"role missing", msgsBody(`[{"content":"a"}]`, ``), wantErr{"invalid_request", "messages[0].role", "required"}},
		{"role bad", msgsBody(`[{"role":"bot","content":"a"}]`, ``), wantErr{"invalid_request", "messages[0].role", "Invalid role 'bot'"}},
		{"role function", msgsBody(`[`+q+`,{"role":"function","name":"f","content":"a"}]`, ``), wantErr{"unsupported_parameter", "messages[1].role", "legacy 'function' role"}},
		{"user content null", msgsBody(`[{"role":"user","content":null}]`, ``), wantErr{"invalid_request", "messages[0].content", "required for user"}},
		{"system content missing", msgsBody(`[{"role":"system"},`+q+`]`, ``), wantErr{"invalid_request", "messages[0].content", "required for system"}},
		{"content number", msgsBody(`[{"role":"user","content":1}]`, ``), wantErr{"invalid_request", "messages[0].content", "a string, null or an array of text parts"}},
		{"image part", msgsBody(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]`, ``), wantErr{"unsupported_parameter", "messages[0].content[1].type", "images are not supported"}},
		{"audio part", msgsBody(`[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`, ``), wantErr{"unsupported_parameter", "messages[0].content[0].type", "audio input"}},
		{"part type unknown", msgsBody(`[{"role":"user","content":[{"type":"blob","text":"a"}]}]`, ``), wantErr{"invalid_request", "messages[0].content[0].type", "Unknown content part type 'blob'"}},
		{"part type missing", msgsBody(`[{"role":"user","content":[{"text":"a"}]}]`, ``), wantErr{"invalid_request", "messages[0].content[0].type", "required"}},
		{"part text missing", msgsBody(`[{"role":"user","content":[{"type":"text"}]}]`, ``), wantErr{"invalid_request", "messages[0].content[0].text", "required"}},
		{"part text number", msgsBody(`[{"role":"user","content":[{"type":"text","text":5}]}]`, ``), wantErr{"invalid_request", "messages[0].content[0].text", "must be a string"}},
		{"tool without id", msgsBody(`[`+q+`,{"role":"tool","content":"r"}]`, ``), wantErr{"invalid_request", "messages[1].tool_call_id", "required for tool messages"}},
		{"tool_call_id on user", msgsBody(`[{"role":"user","content":"q","tool_call_id":"1"}]`, ``), wantErr{"invalid_request", "messages[0].tool_call_id", "Only tool messages"}},
		{"tool_calls on user", msgsBody(`[{"role":"user","content":"q","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`, ``), wantErr{"invalid_request", "messages[0].tool_calls", "Only assistant"}},
		{"reasoning on user", msgsBody(`[{"role":"user","content":"q","reasoning_content":"r"}]`, ``), wantErr{"invalid_request", "messages[0].reasoning_content", "Only assistant"}},
		{"reasoning alias on system", msgsBody(`[{"role":"system","content":"s","reasoning":"r"},`+q+`]`, ``), wantErr{"invalid_request", "messages[0].reasoning", "Only assistant"}},
		{"reasoning disagree", msgsBody(`[`+q+`,{"role":"assistant","content":"a","reasoning":"x","reasoning_content":"y"}]`, ``), wantErr{"invalid_request", "messages[1].reasoning", "disagree"}},
		{"refusal replay", msgsBody(`[`+q+`,{"role":"assistant","content":"a","refusal":"no"}]`, ``), wantErr{"unsupported_parameter", "messages[1].refusal", "refusals"}},
		{"annotations replay", msgsBody(`[`+q+`,{"role":"assistant","content":"a","annotations":[{"type":"url_citation"}]}]`, ``), wantErr{"unsupported_parameter", "messages[1].annotations", "annotations"}},
		{"legacy function_call", msgsBody(`[`+q+`,{"role":"assistant","content":"a","function_call":{"name":"f","arguments":"{}"}}]`, ``), wantErr{"unsupported_parameter", "messages[1].function_call", "tool_calls"}},
		// assistant tool calls
		{"call type custom", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"custom","custom":{}}]}]`, ``), wantErr{"unsupported_parameter", "messages[1].tool_calls[0].type", "'custom'"}},
		{"call no name", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"arguments":"{}"}}]}]`, ``), wantErr{"invalid_request", "messages[1].tool_calls[0].function.name", "required"}},
		{"call args not json", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{x"}}]}]`, ``), wantErr{"invalid_request", "messages[1].tool_calls[0].function.arguments", "JSON object encoded as a string"}},
		{"call args array", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"[1]"}}]}]`, ``), wantErr{"invalid_request", "messages[1].tool_calls[0].function.arguments", "must encode a JSON object, got an array"}},
		{"call args object", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":{"a":1}}}]}]`, ``), wantErr{"invalid_request", "messages[1].tool_calls[0].function.arguments", "must be a string"}},
		{"call args dup key", msgsBody(`[`+q+`,{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":1,\"a\":2}"}}]}]`, ``), wantErr{"invalid_request", "messages[1].tool_calls[0].function.arguments", "Duplicate key 'a'"}},
		// sampling
		{"temperature high", chatBody(`,"temperature":2.5`), wantErr{"invalid_request", "temperature", "[0, 2]"}},
		{"temperature negative", chatBody(`,"temperature":-0.1`), wantErr{"invalid_request", "temperature", "[0, 2]"}},
		{"temperature string", chatBody(`,"temperature":"1"`), wantErr{"invalid_request", "temperature", "must be a number, got a string"}},
		{"top_p zero", chatBody(`,"top_p":0`), wantErr{"invalid_request", "top_p", "(0, 1]"}},
		{"top_p high", chatBody(`,"top_p":1.01`), wantErr{"invalid_request", "top_p", "(0, 1]"}},
		{"min_p high", chatBody(`,"min_p":1.5`), wantErr{"invalid_request", "min_p", "[0, 1]"}},
		{"top_k -2", chatBody(`,"top_k":-2`), wantErr{"invalid_request", "top_k", "-1 or 0"}},
		{"top_k fraction", chatBody(`,"top_k":1.5`), wantErr{"invalid_request", "top_k", "must be an integer"}},
		{"top_k huge", chatBody(`,"top_k":1e12`), wantErr{"invalid_request", "top_k", "out of range"}},
		{"presence low", chatBody(`,"presence_penalty":-2.1`), wantErr{"invalid_request", "presence_penalty", "[-2, 2]"}},
		{"frequency high", chatBody(`,"frequency_penalty":3`), wantErr{"invalid_request", "frequency_penalty", "[-2, 2]"}},
		{"repetition zero", chatBody(`,"repetition_penalty":0`), wantErr{"invalid_request", "repetition_penalty", "(0, 2]"}},
		{"repetition high", chatBody(`,"repetition_penalty":2.5`), wantErr{"invalid_request", "repetition_penalty", "(0, 2]"}},
		{"n zero", chatBody(`,"n":0`), wantErr{"invalid_request", "n", "must be 1"}},
		{"seed fraction", chatBody(`,"seed":0.5`), wantErr{"invalid_request", "seed", "integer"}},
		{"seed huge", chatBody(`,"seed":1e19`), wantErr{"invalid_request", "seed", "out of range"}},
		// lengths and stop
		{"max_tokens zero", chatBody(`,"max_tokens":0`), wantErr{"invalid_request", "max_tokens", "at least 1"}},
		{"max_completion_tokens negative", chatBody(`,"max_completion_tokens":-5`), wantErr{"invalid_request", "max_completion_tokens", "at least 1"}},
		{"max tokens disagree", chatBody(`,"max_tokens":10,"max_completion_tokens":20`), wantErr{"invalid_request", "max_tokens", "disagree"}},
		{"stop too many", chatBody(`,"stop":["a","b","c","d","e"]`), wantErr{"invalid_request", "stop", "at most 4"}},
		{"stop empty string", chatBody(`,"stop":""`), wantErr{"invalid_request", "stop[0]", "must not be empty"}},
		{"stop empty in list", chatBody(`,"stop":["a",""]`), wantErr{"invalid_request", "stop[1]", "must not be empty"}},
		{"stop number", chatBody(`,"stop":["a",1]`), wantErr{"invalid_request", "stop[1]", "must be a string"}},
		{"stop object", chatBody(`,"stop":{}`), wantErr{"invalid_request", "stop", "a string or an array"}},
		{"stream_options without stream", chatBody(`,"stream_options":{"include_usage":true}`), wantErr{"invalid_request", "stream_options", "only allowed when 'stream' is true"}},
		{"stream string", chatBody(`,"stream":"yes"`), wantErr{"invalid_request", "stream", "must be a boolean"}},
		// logprobs
		{"top_logprobs high", chatBody(`,"logprobs":true,"top_logprobs":21`), wantErr{"invalid_request", "top_logprobs", "between 0 and 20"}},
		{"top_logprobs without logprobs", chatBody(`,"top_logprobs":2`), wantErr{"invalid_request", "top_logprobs", "requires 'logprobs'"}},
		// tools
		{"tool type custom", chatBody(`,"tools":[{"type":"custom","custom":{"name":"x"}}]`), wantErr{"unsupported_parameter", "tools[0].type", "'custom'"}},
		{"tool type missing", chatBody(`,"tools":[{"function":{"name":"f"}}]`), wantErr{"invalid_request", "tools[0].type", "required"}},
		{"tool function missing", chatBody(`,"tools":[{"type":"function"}]`), wantErr{"invalid_request", "tools[0].function", "required"}},
		{"tool name bad", chatBody(`,"tools":[{"type":"function","function":{"name":"a b"}}]`), wantErr{"invalid_request", "tools[0].function.name", "^[a-zA-Z0-9_-]{1,64}$"}},
		{"tool name long", chatBody(`,"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]`), wantErr{"invalid_request", "tools[0].function.name", "Invalid function name"}},
		{"tool name empty", chatBody(`,"tools":[{"type":"function","function":{"description":"d"}}]`), wantErr{"invalid_request", "tools[0].function.name", "Invalid function name ''"}},
		{"tool name dup", chatBody(`,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]`), wantErr{"invalid_request", "tools[1].function.name", "Duplicate function name 'f'"}},
		{"tool params array", chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]`), wantErr{"invalid_request", "tools[0].function.parameters", "must be an object"}},
		{"tool params type string", chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]`), wantErr{"invalid_request", "tools[0].function.parameters.type", "of type 'object', got \"string\""}},
		{"tool_choice bad string", chatBody(toolF + `,"tool_choice":"any"`), wantErr{"invalid_request", "tool_choice", "got 'any'"}},
		{"tool_choice required no tools", chatBody(`,"tool_choice":"required"`), wantErr{"invalid_request", "tool_choice", "needs 'tools'"}},
		{"tool_choice unknown function", chatBody(toolF + `,"tool_choice":{"type":"function","function":{"name":"h"}}`), wantErr{"invalid_request", "tool_choice", "'h', which is not among the tools"}},
		{"tool_choice named no tools", chatBody(`,"tool_choice":{"type":"function","function":{"name":"h"}}`), wantErr{"invalid_request", "tool_choice", "not among the tools"}},
		{"tool_choice no name", chatBody(toolF + `,"tool_choice":{"type":"function","function":{}}`), wantErr{"invalid_request", "tool_choice.function.name", "required"}},
		{"tool_choice allowed_tools", chatBody(toolF + `,"tool_choice":{"type":"allowed_tools","allowed_tools":{}}`), wantErr{"unsupported_parameter", "tool_choice.type", "'allowed_tools'"}},
		{"tool_choice number", chatBody(`,"tool_choice":1`), wantErr{"invalid_request", "tool_choice", "a string or an object"}},
		{"parallel string", chatBody(`,"parallel_tool_calls":"no"`), wantErr{"invalid_request", "parallel_tool_calls", "boolean"}},
		// response format
		{"format unknown", chatBody(`,"response_format":{"type":"xml"}`), wantErr{"invalid_request", "response_format.type", "Invalid response format type 'xml'"}},
		{"format no type", chatBody(`,"response_format":{}`), wantErr{"invalid_request", "response_format.type", "required"}},
		{"format schema missing", chatBody(`,"response_format":{"type":"json_schema"}`), wantErr{"invalid_request", "response_format.json_schema", "required for type 'json_schema'"}},
		{"format schema no schema", chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"a"}}`), wantErr{"invalid_request", "response_format.json_schema.schema", "required"}},
		{"format schema bad name", chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}}`), wantErr{"invalid_request", "response_format.json_schema.name", "Invalid schema name"}},
		{"format schema not object", chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":true}}`), wantErr{"invalid_request", "response_format.json_schema.schema", "must be an object"}},
		{"format schema with text", chatBody(`,"response_format":{"type":"text","json_schema":{"name":"a","schema":{}}}`), wantErr{"invalid_request", "response_format.json_schema", "only allowed with type 'json_schema'"}},
		// template kwargs, reasoning effort, metadata
		{"kwargs array", chatBody(`,"chat_template_kwargs":[]`), wantErr{"invalid_request", "chat_template_kwargs", "must be an object"}},
		{"kwargs thinking string", chatBody(`,"chat_template_kwargs":{"enable_thinking":"no"}`), wantErr{"invalid_request", "chat_template_kwargs.enable_thinking", "boolean"}},
		{"kwargs messages", chatBody(`,"chat_template_kwargs":{"messages":[]}`), wantErr{"invalid_request", "chat_template_kwargs.messages", "cannot be set"}},
		{"effort bad", chatBody(`,"reasoning_effort":"max"`), wantErr{"invalid_request", "reasoning_effort", "got 'max'"}},
		{"metadata number value", chatBody(`,"metadata":{"a":1}`), wantErr{"invalid_request", "metadata.a", "must be a string"}},
		{"metadata array", chatBody(`,"metadata":["a"]`), wantErr{"invalid_request", "metadata", "must be an object"}},
		{"store string", chatBody(`,"store":"yes"`), wantErr{"invalid_request", "store", "boolean"}},
		{"user number", chatBody(`,"user":1`), wantErr{"invalid_request", "user", "string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeChatRequest([]byte(tt.body))
			checkErr(t, err, &tt.want)
			if r != nil {
				t.Errorf("a request came back with the error")
			}
		})
	}
}

// TestChatDecode checks what valid requests decode to.
func TestChatDecode(t *testing.T) {
	opts := cmp.Options{cmpopts.IgnoreUnexported(Tool{}), cmpopts.EquateEmpty()}
	tests := []struct {
		name, body string
		want       ChatRequest
	}{
		{"minimal", chatBody(``), ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}}},
		{"nulls are absent", chatBody(`,"temperature":null,"stop":null,"tools":null,"tool_choice":null,"n":null,"stream":null,"logprobs":null,"user":null,"metadata":null,"response_format":null,"seed":null,"stream_options":null`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}}},
		{"sampling", chatBody(`,"temperature":0,"top_p":1,"min_p":0.05,"top_k":-1,"presence_penalty":-2,"frequency_penalty":2,"repetition_penalty":1.1,"seed":-9223372036854775808,"n":1,"max_tokens":1e3,"max_completion_tokens":1000`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}},
				Sampling: Sampling{Temperature: ptr(0.0), TopP: ptr(1.0), MinP: ptr(0.05), TopK: ptr(-1), PresencePenalty: ptr(-2.0), FrequencyPenalty: ptr(2.0),
					RepetitionPenalty: ptr(1.1), Seed: ptr(int64(-9223372036854775808)), N: ptr(1)}, MaxTokens: ptr(1000), MaxCompletionTokens: ptr(1000)}},
		{"stop string", chatBody(`,"stop":"END","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},"logprobs":true,"top_logprobs":20`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}, Stop: Stop{"END"},
				Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true}, Logprobs: true, TopLogprobs: ptr(20)}},
		{"top_logprobs 0 asks nothing", chatBody(`,"logprobs":false,"top_logprobs":0`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}, TopLogprobs: ptr(0)}},
		{"metadata and friends", chatBody(`,"user":"u","store":false,"metadata":{"k": "v"},"service_tier":"default","logit_bias":{},"modalities":["text"],"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking": true, "x":[1]}`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}}, User: "u", Store: ptr(false),
				Metadata: json.RawMessage(`{"k":"v"}`), ReasoningEffort: ptr("none"), ChatTemplateKwargs: json.RawMessage(`{"enable_thinking":true,"x":[1]}`)}},
		{"conversation", msgsBody(`[{"role":"developer","content":[{"type":"text","text":"be brief"}]},{"role":"user","content":"q","name":"ann"},`+
			`{"role":"assistant","content":null,"refusal":null,"annotations":[],"audio":null,"function_call":null,"reasoning":"think","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}},{"index":1,"id":"c2","type":"function","function":{"name":"g","arguments":""}}]},`+
			`{"role":"tool","tool_call_id":"c1","content":"r1"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"r2"}]}]`, toolF+`,"tool_choice":{"type":"function","function":{"name":"g"}},"parallel_tool_calls":false`),
			ChatRequest{Model: "m", Messages: []Message{
				{Role: "developer", Content: Content{Parts: []ContentPart{{Type: "text", Text: "be brief"}}}},
				{Role: "user", Content: TextContent("q"), Name: "ann"},
				{Role: "assistant", Reasoning: ptr("think"), ToolCalls: []ToolCall{
					{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"b":1,"a":2}`}},
					{Index: ptr(1), ID: "c2", Type: "function", Function: FunctionCall{Name: "g"}}}},
				{Role: "tool", ToolCallID: "c1", Content: TextContent("r1")},
				{Role: "tool", ToolCallID: "c2", Content: Content{Parts: []ContentPart{{Type: "text", Text: "r2"}}}},
			},
				Tools: []Tool{
					{Type: "function", Function: FunctionDef{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
					{Type: "function", Function: FunctionDef{Name: "g"}}},
				ToolChoice: &ToolChoice{Mode: "function", Name: "g"}, ParallelToolCalls: ptr(false)}},
		{"response format", chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":{"type":"object"}}}`),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: TextContent("hi")}},
				ResponseFormat: &ResponseFormat{Type: "json_schema", JSONSchema: &JSONSchema{Name: "out", Strict: ptr(true), Schema: json.RawMessage(`{"type":"object"}`)}}}},
		{"empty parts list", msgsBody(`[{"role":"user","content":[]},{"role":"user","content":"q"}]`, ``),
			ChatRequest{Model: "m", Messages: []Message{{Role: "user", Content: Content{Parts: []ContentPart{}}}, {Role: "user", Content: TextContent("q")}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeChatRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got, opts); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestChatHelpers covers MaxNewTokens, StopStrings and EnableThinking.
func TestChatHelpers(t *testing.T) {
	tests := []struct {
		extra    string
		n        int
		set      bool
		stop     []string
		thinking *bool
	}{
		{``, 0, false, nil, nil},
		{`,"max_tokens":7`, 7, true, nil, nil},
		{`,"max_completion_tokens":9,"stop":["a","b"]`, 9, true, []string{"a", "b"}, nil},
		{`,"max_tokens":5,"max_completion_tokens":5,"stop":"x"`, 5, true, []string{"x"}, nil},
		{`,"reasoning_effort":"none"`, 0, false, nil, ptr(false)},
		{`,"reasoning_effort":"high"`, 0, false, nil, nil},
		{`,"chat_template_kwargs":{"enable_thinking":false}`, 0, false, nil, ptr(false)},
		{`,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"none"`, 0, false, nil, ptr(true)},
		{`,"chat_template_kwargs":{"preserve_thinking":true}`, 0, false, nil, nil},
	}
	for _, tt := range tests {
		r, err := DecodeChatRequest([]byte(chatBody(tt.extra)))
		if err != nil {
			t.Fatalf("%s: %v", tt.extra, err)
		}
		n, set := r.MaxNewTokens()
		got := []any{n, set, r.StopStrings(), r.EnableThinking()}
		if diff := cmp.Diff([]any{tt.n, tt.set, tt.stop, tt.thinking}, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.extra, diff)
		}
	}
}

func TestCachePrompt(t *testing.T) {
	r, err := DecodeChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"cache_prompt":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.CachePrompt == nil || *r.CachePrompt {
		t.Errorf("cache_prompt = %v, want false", r.CachePrompt)
	}
	c, err := DecodeCompletionRequest([]byte(`{"model":"m","prompt":"x","cache_prompt":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.CachePrompt == nil || !*c.CachePrompt {
		t.Errorf("completion cache_prompt = %v, want true", c.CachePrompt)
	}
	if _, err := DecodeChatRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"cache_prompt":1}`)); err == nil {
		t.Error("cache_prompt 1 accepted")
	}
}
