package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// roundTripOpts compare decoded requests: a tool's kept bytes are not part
// of its value, and an empty list reads back as none.
var roundTripOpts = cmp.Options{cmpopts.IgnoreUnexported(Tool{}), cmpopts.EquateEmpty()}

// checkFuzzErr asserts a decoding error is a well-formed 400.
func checkFuzzErr(t *testing.T, err *Error) {
	t.Helper()
	switch err.Code {
	case CodeInvalidJSON, CodeInvalidRequest, CodeUnsupportedParameter:
	default:
		t.Fatalf("unexpected code %q: %v", err.Code, err)
	}
	if err.Status != 400 || err.Message == "" || err.Type != TypeInvalidRequest {
		t.Fatalf("malformed error %+v", err)
	}
}

// FuzzDecodeChatRequest: decoding never panics; a request that decodes
// validates, survives a marshal/decode round trip unchanged, and converts
// for the template without panicking.
func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{
		chatBody(``),
		chatBody(`,"temperature":0.7,"top_p":0.9,"top_k":20,"min_p":0,"seed":1,"max_tokens":5,"stop":["a"],"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2`),
		msgsBody(`[{"role":"developer","content":[{"type":"text","text":"s"}]},{"role":"user","content":"q"},{"role":"assistant","content":null,"reasoning":"r","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":[2]}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]`, toolF+`,"tool_choice":"auto"`),
		chatBody(`,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"none","metadata":{"k":"v"}`),
		chatBody(`,"model":"dup"`),
		`{"model":"m","messages":[{"role":"user","content":"\ud800 <&> \u2028"}],"n":1.0,"max_completion_tokens":1e2}`,
		`[]`, `{`, `{"temperature":NaN}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeChatRequest(body)
		if err != nil {
			checkFuzzErr(t, err)
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded request does not validate: %v", err)
		}
		again := roundTrip(t, r, func(b []byte) (any, *Error) { return DecodeChatRequest(b) })
		if diff := cmp.Diff(r, again, roundTripOpts); diff != "" {
			t.Fatalf("round trip (-first +second)\n%s", diff)
		}
		_, _ = r.TemplateMessages()
		_ = r.TemplateTools()
		_ = r.EnableThinking()
		r.MaxNewTokens()
		r.StopStrings()
	})
}

// FuzzDecodeCompletionRequest: decoding never panics; a request that decodes
// validates and survives a round trip.
func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":"p"}`,
		`{"model":"m","prompt":[1,2,3],"echo":true,"logprobs":3,"max_tokens":4,"stop":"x","best_of":1,"suffix":""}`,
		`{"model":"m","prompt":[[5]],"stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","prompt":["a","b"]}`,
		`{"model":"m","prompt":[-1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeCompletionRequest(body)
		if err != nil {
			checkFuzzErr(t, err)
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded request does not validate: %v", err)
		}
		again := roundTrip(t, r, func(b []byte) (any, *Error) { return DecodeCompletionRequest(b) })
		if diff := cmp.Diff(r, again, roundTripOpts); diff != "" {
			t.Fatalf("round trip (-first +second)\n%s", diff)
		}
	})
}

// FuzzDecodeResponsesRequest: decoding never panics; a request that decodes
// validates, survives a round trip and converts to chat without panicking.
func FuzzDecodeResponsesRequest(f *testing.F) {
	for _, s := range []string{
		respBody(``),
		respBody(`,"instructions":"i","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"},"reasoning":{"effort":"none","summary":"auto"},"text":{"format":{"type":"text"}},"max_output_tokens":9`),
		itemsBody(`[{"role":"system","content":"s"},{"role":"user","content":[{"type":"input_text","text":"q"}]},{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}],"content":[{"type":"reasoning_text","text":"r"}]},{"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"a","annotations":[]}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}]`, ``),
		itemsBody(`[{"type":"function_call_output","call_id":"x","output":[{"type":"input_text","text":"o"}]}]`, `,"previous_response_id":"resp_1"`),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeResponsesRequest(body)
		if err != nil {
			checkFuzzErr(t, err)
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded request does not validate: %v", err)
		}
		again := roundTrip(t, r, func(b []byte) (any, *Error) { return DecodeResponsesRequest(b) })
		if diff := cmp.Diff(r, again, roundTripOpts); diff != "" {
			t.Fatalf("round trip (-first +second)\n%s", diff)
		}
		msgs, _, err := r.ToChat(nil)
		if err == nil {
			_, _ = TemplateMessages(msgs)
		}
		_ = r.EnableThinking()
	})
}

// roundTrip marshals a decoded request and decodes it again.
func roundTrip[T any](t *testing.T, r *T, decode func([]byte) (any, *Error)) *T {
	t.Helper()
	b, merr := Marshal(r)
	if merr != nil {
		t.Fatalf("marshal: %v", merr)
	}
	again, err := decode(b)
	if err != nil {
		t.Fatalf("re-decoding %s: %v", b, err)
	}
	return again.(*T)
}
