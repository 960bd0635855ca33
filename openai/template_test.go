package openai

import (
	"encoding/json"
	"testing"
)

// TestTemplateMessages checks the normalization for the chat template
// against exact JSON, key order included.
func TestTemplateMessages(t *testing.T) {
	tests := []struct {
		name, msgs, want string
	}{
		{"developer becomes system, parts kept, name kept",
			`[{"role":"developer","content":[{"type":"text","text":"be <brief>"}]},{"name":"ann","content":"q & a","role":"user"}]`,
			`[{"role":"system","content":[{"type":"text","text":"be <brief>"}]},{"role":"user","content":"q & a","name":"ann"}]`},
		{"arguments become the object they encode, key order kept",
			`[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"zeta\": 1, \"alpha\": {\"y\": [true, null], \"b\": \"s\"}, \"mid\": 2.50}"}}]}]`,
			`[{"role":"user","content":"q"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"zeta":1,"alpha":{"y":[true,null],"b":"s"},"mid":2.50}}}]}]`},
		{"blank arguments are an empty object, index dropped, null content kept",
			`[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":" "}}]},{"role":"tool","tool_call_id":"x","content":"r"}]`,
			`[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","content":"r","tool_call_id":"x"}]`},
		{"reasoning becomes reasoning_content; echoed nulls dropped",
			`[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning":"r1","refusal":null,"annotations":[]},{"role":"assistant","content":"b","reasoning_content":"r2"},{"role":"user","content":"q2"}]`,
			`[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_content":"r1"},{"role":"assistant","content":"b","reasoning_content":"r2"},{"role":"user","content":"q2"}]`},
		{"unicode and escapes survive",
			`[{"role":"user","content":"é\u00e9\n\"\u2028"}]`,
			`[{"role":"user","content":"éé\n\"\u2028"}]`}, // encoding/json escapes U+2028 always
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeChatRequest([]byte(msgsBody(tt.msgs, ``)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.TemplateMessages()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON")
			}
		})
	}
}

// TestTemplateMessagesErrors covers what the template itself would reject.
func TestTemplateMessagesErrors(t *testing.T) {
	tests := []struct {
		name, msgs string
		want       wantErr
	}{
		{"system not first", `[{"role":"user","content":"q"},{"role":"system","content":"s"}]`, wantErr{"invalid_request", "messages[1].role", "must be the first message"}},
		{"two system messages", `[{"role":"system","content":"s"},{"role":"developer","content":"d"},{"role":"user","content":"q"}]`, wantErr{"invalid_request", "messages[1].role", "developer message must be the first"}},
		{"no user", `[{"role":"system","content":"s"},{"role":"assistant","content":"a"}]`, wantErr{"invalid_request", "messages", "must contain a user message"}},
		{"only tool responses", `[{"role":"user","content":" <tool_response>x</tool_response>\n"}]`, wantErr{"invalid_request", "messages", "other than tool responses"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeChatRequest([]byte(msgsBody(tt.msgs, ``)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.TemplateMessages()
			checkErr(t, err, &tt.want)
		})
	}
	if _, err := TemplateMessages(nil); err == nil || err.Param != "messages" {
		t.Errorf("no messages: %v", err)
	}
	bad := []Message{{Role: "user", Content: TextContent("q")}, {Role: "assistant", ToolCalls: []ToolCall{{Type: "function", Function: FunctionCall{Name: "f", Arguments: "[]"}}}}}
	_, err := TemplateMessages(bad)
	checkErr(t, err, &wantErr{"invalid_request", "messages[1].tool_calls[0].function.arguments", "must encode a JSON object"})
}

// TestTemplateTools keeps the client's bytes and order, and writes tools
// built in code in OpenAI's form.
func TestTemplateTools(t *testing.T) {
	body := chatBody(`,"tools":[ {"function": {"parameters": {"properties": {"z": {"type": "string"}, "a": {"type": "integer"}}, "type": "object"}, "description": "Find <it> & more", "name": "find", "strict": true}, "type": "function"} ]`)
	r, err := DecodeChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"function":{"parameters":{"properties":{"z":{"type":"string"},"a":{"type":"integer"}},"type":"object"},"description":"Find <it> & more","name":"find","strict":true},"type":"function"}]`
	if got := string(r.TemplateTools()); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	if got := (&ChatRequest{}).TemplateTools(); got != nil {
		t.Errorf("no tools: %s", got)
	}
	built := []Tool{{Type: "function", Function: FunctionDef{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"b":{},"a":{}}}`)}}, {Type: "function", Function: FunctionDef{Name: "g"}}}
	want = `[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"b":{},"a":{}}}}},{"type":"function","function":{"name":"g"}}]`
	if got := string(TemplateTools(built)); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}
