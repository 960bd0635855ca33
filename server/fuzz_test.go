package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/server"
)

// FuzzChatHandler sends arbitrary bodies to /v1/chat/completions on a
// scripted engine: no input may crash the server or make it answer 500,
// and every refusal is an OpenAI error body.
func FuzzChatHandler(f *testing.F) {
	fx := tiny(f)
	eng := newScripted(fx)
	eng.say(fx, "Hm.\n</think>\n\nSure.\n\n"+weatherCall)
	srv := server.New(server.Config{MaxBodyBytes: 1 << 16})
	srv.SetModel(fx.model(eng))
	h := srv.Handler()

	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}]`
	for _, seed := range []string{
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"test/tiny","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],` + tools + `}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":"required","parallel_tool_calls":false}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],` + tools + `,"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"x\"}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":20,"stop":["Sure"],"max_tokens":5,"seed":7,"temperature":1.5,"top_k":3,"min_p":0.1,"repetition_penalty":1.1}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false,"x":[1,{"y":null}]},"reasoning_effort":"none"}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":1e309}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"\ud800"}]}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi","content":"x"}]}`,
		`{"model":"test/tiny","messages":[{"role":"assistant","content":"x"}]}`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"{% raise_exception('x') %}"}]}`,
		`{"model":"x","messages":[]}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`{"model":"test/tiny","messages":[{"role":"user","content":"hi"}],"temperature":NaN}`,
		``,
		"\xff\xfe",
	} {
		f.Add([]byte(seed), "application/json")
	}
	f.Add([]byte(`{}`), "text/plain")
	f.Add([]byte(`{}`), "application/json; charset=utf-8")

	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK:
			if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
				if !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
					t.Fatalf("stream not ended: %q", w.Body.String())
				}
				return
			}
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("200 with a body that is not JSON: %q", w.Body.String())
			}
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
			var e struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("status %d with body %q", w.Code, w.Body.String())
			}
		default:
			t.Fatalf("status %d for %q (Content-Type %q): %s", w.Code, body, contentType, w.Body.String())
		}
	})
}
