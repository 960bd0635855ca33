package openai

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wantErr is what a test expects of an *Error: code and param exactly, and a
// fragment of the message.
type wantErr struct {
	Code, Param string
	Says        string
}

// checkErr compares an error with a wantErr; nil want means no error.
func checkErr(t *testing.T, got *Error, want *wantErr) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("unexpected error: %v", got)
		}
		return
	}
	if got == nil {
		t.Fatalf("no error, want %s at %q", want.Code, want.Param)
	}
	if diff := cmp.Diff([2]string{want.Code, want.Param}, [2]string{got.Code, got.Param}); diff != "" {
		t.Errorf("code, param (-want +got)\n%s\nmessage: %s", diff, got.Message)
	}
	if !strings.Contains(got.Message, want.Says) {
		t.Errorf("message %q does not say %q", got.Message, want.Says)
	}
	if got.Status != 400 {
		t.Errorf("status %d, want 400", got.Status)
	}
}

// chatBody wraps extra top-level members into a valid chat request.
func chatBody(extra string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + extra + `}`
}

// TestStrictSyntax covers what is rejected before any field is read.
func TestStrictSyntax(t *testing.T) {
	tests := []struct {
		name, body string
		want       wantErr
	}{
		{"empty", ``, wantErr{"invalid_json", "", "empty"}},
		{"blank", " \n\t", wantErr{"invalid_json", "", "empty"}},
		{"truncated", `{"model":"m"`, wantErr{"invalid_json", "", "offset 12"}},
		{"bad token", `{"model":x}`, wantErr{"invalid_json", "", "offset 9"}},
		{"trailing", `{"model":"m"} {}`, wantErr{"invalid_json", "", "offset 14"}},
		{"array", `[1,2]`, wantErr{"invalid_json", "", "must be a JSON object, got an array"}},
		{"string", `"hi"`, wantErr{"invalid_json", "", "got a string"}},
		{"null", `null`, wantErr{"invalid_json", "", "got null"}},
		{"NaN", chatBody(`,"temperature":NaN`), wantErr{"invalid_json", "", "NaN is not a JSON number"}},
		{"Infinity", chatBody(`,"temperature":Infinity`), wantErr{"invalid_json", "", "Infinity is not a JSON number"}},
		{"-Infinity", chatBody(`,"temperature":-Infinity`), wantErr{"invalid_json", "", "-Infinity is not a JSON number"}},
		{"overflow", chatBody(`,"temperature":1e400`), wantErr{"invalid_json", "temperature", "out of range"}},
		{"overflow deep", chatBody(`,"metadata":{"a":[1,-1e999]}`), wantErr{"invalid_json", "metadata.a[1]", "out of range"}},
		{"bad utf8", "{\"model\":\"m\xff\"}", wantErr{"invalid_json", "", "not valid UTF-8 (at byte offset 11)"}},
		{"dup top", `{"model":"m","model":"n","messages":[]}`, wantErr{"invalid_json", "model", "Duplicate key 'model'"}},
		{"dup escaped", `{"model":"m","mod\u0065l":"n"}`, wantErr{"invalid_json", "model", "Duplicate key"}},
		{"dup in message", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"a","role":"system"}]}`,
			wantErr{"invalid_json", "messages[1].role", "Duplicate key 'messages[1].role'"}},
		{"dup deep in schema", chatBody(`,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","type":"number"}}}}}]`),
			wantErr{"invalid_json", "tools[0].function.parameters.properties.a.type", "Duplicate key"}},
		{"dup in big object", `{"model":"m","a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"a3":3}`,
			wantErr{"invalid_json", "a3", "Duplicate key"}},
		{"dup in kwargs", chatBody(`,"chat_template_kwargs":{"enable_thinking":true,"enable_thinking":false}`),
			wantErr{"invalid_json", "chat_template_kwargs.enable_thinking", "Duplicate key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeChatRequest([]byte(tt.body))
			checkErr(t, err, &tt.want)
		})
	}
}

// TestStrictDecodersAgree runs the syntax checks through every decoder.
func TestStrictDecodersAgree(t *testing.T) {
	decoders := map[string]func([]byte) *Error{
		"chat":       func(b []byte) *Error { _, err := DecodeChatRequest(b); return err },
		"completion": func(b []byte) *Error { _, err := DecodeCompletionRequest(b); return err },
		"responses":  func(b []byte) *Error { _, err := DecodeResponsesRequest(b); return err },
		"tokenize":   func(b []byte) *Error { _, err := DecodeTokenizeRequest(b); return err },
		"detokenize": func(b []byte) *Error { _, err := DecodeDetokenizeRequest(b); return err },
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			checkErr(t, decode([]byte(`[]`)), &wantErr{"invalid_json", "", "must be a JSON object"})
			checkErr(t, decode([]byte(`{"model":"m","model":"m"}`)), &wantErr{"invalid_json", "model", "Duplicate key"})
			checkErr(t, decode([]byte(`{"model":NaN}`)), &wantErr{"invalid_json", "", "NaN"})
			checkErr(t, decode([]byte(`{"bogus":1}`)), &wantErr{"unsupported_parameter", "bogus", "Unknown parameter 'bogus'"})
		})
	}
}

// TestStrictUnknownFields rejects unknown fields at every depth with their
// path.
func TestStrictUnknownFields(t *testing.T) {
	tests := []struct {
		name, body, param string
	}{
		{"top", chatBody(`,"foo":1`), "foo"},
		{"top null", chatBody(`,"foo":null`), "foo"},
		{"vllm extension", chatBody(`,"ignore_eos":true`), "ignore_eos"},
		{"message", `{"model":"m","messages":[{"role":"user","content":"hi","foo":1}]}`, "messages[0].foo"},
		{"content part", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}]}`, "messages[0].content[0].cache_control"},
		{"tool call", `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"},"x":1}]}]}`, "messages[1].tool_calls[0].x"},
		{"tool call function", `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}","x":1}}]}]}`, "messages[1].tool_calls[0].function.x"},
		{"tool", chatBody(`,"tools":[{"type":"function","function":{"name":"f"},"x":1}]`), "tools[0].x"},
		{"tool function", chatBody(`,"tools":[{"type":"function","function":{"name":"f","x":1}}]`), "tools[0].function.x"},
		{"tool choice", chatBody(`,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f","x":1}}`), "tool_choice.function.x"},
		{"stream options", chatBody(`,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`), "stream_options.continuous_usage_stats"},
		{"response format", chatBody(`,"response_format":{"type":"text","x":1}`), "response_format.x"},
		{"json schema", chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{},"x":1}}`), "response_format.json_schema.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeChatRequest([]byte(tt.body))
			checkErr(t, err, &wantErr{"unsupported_parameter", tt.param, "Unknown parameter '" + tt.param + "'"})
		})
	}
}

// TestStrictKnownUnsupported rejects OpenAI features this server lacks, and
// accepts the values of them that ask for nothing.
func TestStrictKnownUnsupported(t *testing.T) {
	tests := []struct {
		field, rejected, accepted, says string
	}{
		{"n", `2`, `1`, "'n' must be 1"},
		{"audio", `{"voice":"alloy","format":"mp3"}`, `null`, "audio"},
		{"modalities", `["text","audio"]`, `["text"]`, "only text"},
		{"prediction", `{"type":"content","content":"x"}`, `null`, "predicted outputs"},
		{"web_search_options", `{}`, `null`, "web search"},
		{"functions", `[{"name":"f"}]`, `null`, "use 'tools'"},
		{"function_call", `"auto"`, `null`, "use 'tool_choice'"},
		{"logit_bias", `{"50256":-100}`, `{}`, "logit_bias"},
		{"service_tier", `"flex"`, `"auto"`, "single service tier"},
		{"verbosity", `"low"`, `null`, "verbosity"},
		{"prompt_cache_key", `"k"`, `null`, "prompt cache"},
		{"safety_identifier", `"u"`, `null`, "safety"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			_, err := DecodeChatRequest([]byte(chatBody(`,"` + tt.field + `":` + tt.rejected)))
			checkErr(t, err, &wantErr{"unsupported_parameter", tt.field, tt.says})
			if _, err := DecodeChatRequest([]byte(chatBody(`,"` + tt.field + `":` + tt.accepted))); err != nil {
				t.Errorf("%s=%s: %v", tt.field, tt.accepted, err)
			}
		})
	}
}
