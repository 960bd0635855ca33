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
	"github.com/openai/openai-go/v3/option"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/server"
)

// errorReply is the part of an error response a client acts on.
type errorReply struct {
	Status int
	Code   string
	Type   string
	Param  string
	// Header holds the headers the status requires (Allow, WWW-Authenticate,
	// Retry-After).
	Header string
}

func errorOf(r reply, header string) errorReply {
	var e struct {
		Error struct {
			Code, Type string
			Param      *string
			Message    string
		} `json:"error"`
	}
	json.Unmarshal(r.body, &e) // a body that is not an error leaves it empty
	out := errorReply{Status: r.status, Code: e.Error.Code, Type: e.Error.Type}
	if e.Error.Param != nil {
		out.Param = *e.Error.Param
	}
	if header != "" {
		out.Header = strings.Join(r.header.Values(header), ",")
	}
	return out
}

// TestErrors checks statuses and stable error codes, in OpenAI's shape.
func TestErrors(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{MaxBodyBytes: 1 << 16})
	h.eng.say(h.f, "ok")
	valid := `{"model":"test/tiny","messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name         string
		method, path string
		body         string
		contentType  string
		header       string // a response header to compare
		want         errorReply
	}{
		{name: "not JSON", body: `{"model":`, want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "empty body", body: ``, want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "not an object", body: `[1,2]`, want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "duplicate key", body: `{"model":"test/tiny","model":"x","messages":[{"role":"user","content":"hi"}]}`,
			want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error", Param: "model"}},
		{name: "duplicate key inside a message", body: `{"model":"test/tiny","messages":[{"role":"user","role":"user","content":"hi"}]}`,
			want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error", Param: "messages[0].role"}},
		{name: "NaN", body: valid + `,"temperature":NaN}`, want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "Infinity", body: valid + `,"top_p":Infinity}`, want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "unknown field", body: valid + `,"temprature":0.5}`,
			want: errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "temprature"}},
		{name: "unknown message field", body: `{"model":"test/tiny","messages":[{"role":"user","content":"hi","mood":"happy"}]}`,
			want: errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "messages[0].mood"}},
		{name: "n above 1", body: valid + `,"n":2}`, want: errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "n"}},
		{name: "a schema keyword that cannot be enforced is refused, not ignored",
			body: valid + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}}}}}`,
			want: errorReply{Status: 400, Code: "unsupported_schema_keyword", Type: "invalid_request_error", Param: "response_format.json_schema.schema/properties/n/multipleOf"}},
		{name: "a lookahead in a pattern is refused",
			body: valid + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"string","pattern":"^a(?=b)"}}}}`,
			want: errorReply{Status: 400, Code: "unsupported_schema_keyword", Type: "invalid_request_error", Param: "response_format.json_schema.schema/pattern"}},
		{name: "an unsatisfiable schema is invalid",
			body: valid + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"integer","minimum":5,"maximum":4}}}}`,
			want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "response_format.json_schema.schema"}},
		{name: "a tool schema keyword that cannot be enforced is refused under tool_choice required",
			body: valid + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}}}],"tool_choice":"required"}`,
			want: errorReply{Status: 400, Code: "unsupported_schema_keyword", Type: "invalid_request_error", Param: "tools/0/function/parameters/properties/a/uniqueItems"}},
		{name: "logit_bias", body: valid + `,"logit_bias":{"1":5}}`, want: errorReply{Status: 400, Code: "unsupported_parameter", Type: "invalid_request_error", Param: "logit_bias"}},
		{name: "wrong type", body: valid + `,"temperature":"hot"}`, want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "temperature"}},
		{name: "temperature out of range", body: valid + `,"temperature":3}`, want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "temperature"}},
		{name: "top_logprobs above 20", body: valid + `,"logprobs":true,"top_logprobs":21}`,
			want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "top_logprobs"}},
		{name: "five stop strings", body: valid + `,"stop":["a","b","c","d","e"]}`, want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "stop"}},
		{name: "no messages", body: `{"model":"test/tiny","messages":[]}`, want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "messages"}},
		{name: "no model", body: `{"messages":[{"role":"user","content":"hi"}]}`, want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "model"}},
		{name: "stream_options without stream", body: valid + `,"stream_options":{"include_usage":true}}`,
			want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "stream_options"}},
		{name: "tool_choice names an unknown function", body: valid + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "tool_choice"}},
		{name: "system message not first", body: `{"model":"test/tiny","messages":[{"role":"user","content":"hi"},{"role":"system","content":"x"}]}`,
			want: errorReply{Status: 400, Code: "invalid_request", Type: "invalid_request_error", Param: "messages[1].role"}},
		{name: "max_tokens beyond the context", body: valid + `,"max_tokens":5000}`,
			want: errorReply{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error"}},
		{name: "prompt beyond the context", body: `{"model":"test/tiny","messages":[{"role":"user","content":"` + strings.Repeat("word ", 4000) + `"}]}`,
			want: errorReply{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error"}},
		{name: "unknown model", body: `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
			want: errorReply{Status: 404, Code: "model_not_found", Type: "invalid_request_error", Param: "model"}},
		{name: "unknown model on completions", path: "/v1/completions", body: `{"model":"gpt-4o","prompt":"hi"}`,
			want: errorReply{Status: 404, Code: "model_not_found", Type: "invalid_request_error", Param: "model"}},
		{name: "unknown model on responses", path: "/v1/responses", body: `{"model":"gpt-4o","input":"hi"}`,
			want: errorReply{Status: 404, Code: "model_not_found", Type: "invalid_request_error", Param: "model"}},
		{name: "unknown route", path: "/v1/embeddings", body: `{}`, want: errorReply{Status: 404, Code: "not_found", Type: "invalid_request_error"}},
		{name: "GET on a POST endpoint", method: http.MethodGet, header: "Allow",
			want: errorReply{Status: 405, Code: "method_not_allowed", Type: "invalid_request_error", Header: "POST"}},
		{name: "POST on a GET endpoint", path: "/v1/models", body: `{}`, header: "Allow",
			want: errorReply{Status: 405, Code: "method_not_allowed", Type: "invalid_request_error", Header: "GET"}},
		{name: "PUT on a stored response", method: http.MethodPut, path: "/v1/responses/resp_x", body: `{}`, header: "Allow",
			want: errorReply{Status: 405, Code: "method_not_allowed", Type: "invalid_request_error", Header: "GET,DELETE"}},
		{name: "body over the limit", body: valid + `,"user":"` + strings.Repeat("x", 1<<16) + `"}`,
			want: errorReply{Status: 413, Code: "request_too_large", Type: "invalid_request_error"}},
		{name: "a multipart form", body: valid + `}`, contentType: "multipart/form-data; boundary=x",
			want: errorReply{Status: 415, Code: "unsupported_media_type", Type: "invalid_request_error"}},
		{name: "JSON sent as a form (curl -d)", body: valid + `,"max_tokens":2}`, contentType: "application/x-www-form-urlencoded",
			want: errorReply{Status: 200}},
		{name: "JSON sent as text", body: valid + `,"max_tokens":2}`, contentType: "text/plain",
			want: errorReply{Status: 200}},
		{name: "a form that is not JSON", body: `model=x&messages=y`, contentType: "application/x-www-form-urlencoded",
			want: errorReply{Status: 400, Code: "invalid_json", Type: "invalid_request_error"}},
		{name: "tool parameters nested 1000 deep", body: valid + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":` + deep(1000) + `}}}]}`,
			want: errorReply{Status: 400, Code: "nesting_too_deep", Type: "invalid_request_error", Param: "tools[0].function.parameters.properties" + strings.Repeat(".a", openai.MaxNesting-4)}},
		{name: "tool-call arguments nested 1000 deep", body: `{"model":"test/tiny","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"` + strings.ReplaceAll(deep(1000), `"`, `\"`) + `"}}]}]}`,
			want: errorReply{Status: 400, Code: "nesting_too_deep", Type: "invalid_request_error", Param: "messages[1].tool_calls[0].function.arguments"}},
		{name: "tool parameters as deep as allowed", body: valid + `,"max_tokens":2,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":` + deep(openai.MaxNesting-5) + `}}}]}`,
			want: errorReply{Status: 200}},
		{name: "JSON with a charset", body: valid + `,"max_tokens":2}`, contentType: "application/json; charset=utf-8",
			want: errorReply{Status: 200}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method = http.MethodPost
			}
			if path == "" {
				path = "/v1/chat/completions"
			}
			var body any
			if tc.body != "" || method == http.MethodPost {
				body = tc.body
			}
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			r := h.do(t, method, path, body, "Content-Type", ct)
			if diff := cmp.Diff(tc.want, errorOf(r, tc.header)); diff != "" {
				t.Errorf("(-want +got):\n%s\nbody: %.300s", diff, r.body)
			}
			if r.status != http.StatusOK && r.header.Get("Content-Type") != "application/json" {
				t.Errorf("error Content-Type %q", r.header.Get("Content-Type"))
			}
		})
	}
}

// TestErrorsChunkedBody checks the body limit without a Content-Length.
func TestErrorsChunkedBody(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{MaxBodyBytes: 4096})
	body := `{"model":"test/tiny","messages":[{"role":"user","content":"` + strings.Repeat("x", 8000) + `"}]}`
	// A reader of unknown length makes the client send it chunked.
	req, err := http.NewRequest(http.MethodPost, h.ts.URL+"/v1/chat/completions", struct{ *strings.Reader }{strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
}

// TestErrorsThroughClient checks that the official client reads the errors.
func TestErrorsThroughClient(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{})
	ctx := context.Background()
	c := h.client()
	p := params("hi")
	p.Model = "gpt-4o"
	_, err := c.Chat.Completions.New(ctx, p)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Errorf("unknown model: %v", err)
	}
	p = params("hi")
	p.MaxTokens = oai.Int(100000)
	_, err = c.Chat.Completions.New(ctx, p)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "context_length_exceeded" {
		t.Errorf("too many tokens: %v", err)
	}
	// Unknown fields are refused, not ignored.
	_, err = c.Chat.Completions.New(ctx, params("hi"), option.WithJSONSet("guided_json", map[string]any{}))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "unsupported_parameter" {
		t.Errorf("unknown field: %v", err)
	}
}

// TestAuth checks the API key: 401 with WWW-Authenticate without it or with
// a wrong one, through the client and raw; health and readiness stay open.
func TestAuth(t *testing.T) {
	t.Parallel()
	h := start(t, server.Config{APIKey: "s3cret"})
	h.eng.say(h.f, "ok")
	ctx := context.Background()
	wrong, right := h.client(), h.client(option.WithAPIKey("s3cret"))
	_, err := wrong.Chat.Completions.New(ctx, params("hi")) // sends "test-key"
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Fatalf("wrong key: %v", err)
	}
	if got := apiErr.Response.Header.Get("WWW-Authenticate"); got != "Bearer" {
		t.Errorf("WWW-Authenticate %q", got)
	}
	if _, err := right.Chat.Completions.New(ctx, params("hi")); err != nil {
		t.Errorf("right key: %v", err)
	}
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{http.MethodGet, "/v1/models", "", 401},
		{http.MethodGet, "/v1/models", "Bearer wrong", 401},
		{http.MethodGet, "/v1/models", "Basic czNjcmV0", 401},
		{http.MethodGet, "/v1/models", "Bearer s3cret", 200},
		{http.MethodGet, "/metrics", "", 401},
		{http.MethodPost, "/tokenize", "", 401},
		{http.MethodGet, "/v1/responses/resp_1", "", 401},
		{http.MethodGet, "/health", "", 200},
		{http.MethodGet, "/ready", "", 200},
	} {
		var body any
		if tc.method == http.MethodPost {
			body = `{"prompt":"hi"}`
		}
		r := h.do(t, tc.method, tc.path, body, "Authorization", tc.auth)
		if r.status != tc.want {
			t.Errorf("%s %s with %q: status %d, want %d", tc.method, tc.path, tc.auth, r.status, tc.want)
		}
		if r.status == 401 && (r.header.Get("WWW-Authenticate") != "Bearer" || r.errorCode() != "invalid_api_key") {
			t.Errorf("%s %s: 401 without WWW-Authenticate or code: %v %s", tc.method, tc.path, r.header, r.body)
		}
	}
}

// deep is a JSON object nested depth levels: {"a":{"a":…{}}}.
func deep(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}
