package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/server"
)

// constrainedSchemas are the response formats the random tiny model must
// satisfy: every keyword the grammar enforces, nested.
var constrainedSchemas = []string{
	`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"],"additionalProperties":false}`,
	`{"type":"object","properties":{"x":{"type":"number","minimum":-2,"maximum":2}},"required":["x"],"additionalProperties":false}`,
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8}},"required":["name"],"additionalProperties":false}`,
	`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}[0-9]{2}$"}},"required":["code"],"additionalProperties":false}`,
	`{"type":"object","properties":{"color":{"enum":["red","green","blue"]}},"required":["color"],"additionalProperties":false}`,
	`{"type":"object","properties":{"v":{"const":42}},"required":["v"],"additionalProperties":false}`,
	`{"type":"object","properties":{"v":{"type":["integer","null"],"minimum":0,"maximum":3}},"required":["v"],"additionalProperties":false}`,
	`{"type":"object","properties":{"v":{"anyOf":[{"type":"boolean"},{"type":"string","maxLength":3}]}},"required":["v"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"integer","minimum":0,"maximum":99},"minItems":2,"maxItems":4}`,
	`{"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["tags"],"additionalProperties":false}`,
	`{"type":"object","properties":{"p":{"type":"object","properties":{"x":{"type":"integer","minimum":-5,"maximum":5},"y":{"type":"integer","minimum":-5,"maximum":5}},"required":["x","y"],"additionalProperties":false}},"required":["p"],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"integer","minimum":0,"maximum":1}},"required":["a","c"],"additionalProperties":false}`,
	`{"type":"string","minLength":2,"maxLength":4}`,
	`{"type":"integer","minimum":100,"maximum":120}`,
	`{"enum":[1,"two",null,true]}`,
	`{"type":"object","additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"when":{"type":"string","format":"date"}},"required":["when"],"additionalProperties":false}`,
	`{"$defs":{"pt":{"type":"object","properties":{"x":{"enum":[0,1]},"y":{"enum":[0,1]}},"required":["x","y"],"additionalProperties":false}},"type":"object","properties":{"from":{"$ref":"#/$defs/pt"},"to":{"$ref":"#/$defs/pt"}},"required":["from","to"],"additionalProperties":false}`,
	`{"type":"object","properties":{"items":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":9},"ok":{"type":"boolean"}},"required":["id","ok"],"additionalProperties":false}}},"required":["items"],"additionalProperties":false}`,
	`{"type":"object","properties":{"s":{"type":"string","pattern":"^(yes|no)$"},"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}},"required":["s","n"],"additionalProperties":false}`,
}

// TestConstrainedRandomModel serves the random tiny model on the CPU
// engine and asks for each schema with five seeds at temperature 1: every
// answer must parse and satisfy its schema (checked by an independent
// validator). Under tool_choice "required" and a named choice, every
// answer must be a call of a declared tool with valid arguments.
func TestConstrainedRandomModel(t *testing.T) {
	t.Parallel()
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srv := server.New(server.Config{})
	srv.SetModel(f.model(l.Engine))
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	post := func(t *testing.T, body map[string]any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, raw)
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	request := func(seed int) map[string]any {
		return map[string]any{"model": modelID, "messages": []map[string]any{{"role": "user", "content": "Answer in JSON."}},
			"temperature": 1, "seed": seed, "max_tokens": 1200, "chat_template_kwargs": map[string]any{"enable_thinking": false}}
	}
	message := func(out map[string]any) (map[string]any, string) {
		ch := out["choices"].([]any)[0].(map[string]any)
		return ch["message"].(map[string]any), ch["finish_reason"].(string)
	}

	for i, schema := range constrainedSchemas {
		v := compileSchema(t, schema)
		for seed := range 5 {
			t.Run(fmt.Sprintf("schema%d/seed%d", i, seed), func(t *testing.T) {
				req := request(seed)
				req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "s", "schema": json.RawMessage(schema)}}
				msg, finish := message(post(t, req))
				content, _ := msg["content"].(string)
				if finish != "stop" {
					t.Fatalf("finish %q, content %q", finish, content)
				}
				validate(t, v, content)
			})
		}
	}
	t.Run("after the reasoning", func(t *testing.T) {
		// Thinking on, bounded: the reasoning is free (but may not end the
		// turn), the answer after it constrained.
		schema := constrainedSchemas[11]
		v := compileSchema(t, schema)
		for seed := range 5 {
			req := request(seed)
			req["chat_template_kwargs"] = map[string]any{"enable_thinking": true}
			req["thinking_budget"] = 16
			req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "s", "schema": json.RawMessage(schema)}}
			msg, finish := message(post(t, req))
			content, _ := msg["content"].(string)
			if reasoning, _ := msg["reasoning_content"].(string); reasoning == "" || finish != "stop" {
				t.Fatalf("seed %d: finish %q, reasoning %q, content %q", seed, finish, reasoning, content)
			}
			validate(t, v, content)
		}
	})
	t.Run("thinking without a budget", func(t *testing.T) {
		// Thinking on and no budget: the random model rarely ends its
		// reasoning by itself, so the server bounds it to leave room for
		// the constrained answer.
		schema := `{"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99}},"required":["a"],"additionalProperties":false}`
		v := compileSchema(t, schema)
		for seed := range 5 {
			req := request(seed)
			req["chat_template_kwargs"] = map[string]any{"enable_thinking": true}
			req["max_tokens"] = 400
			req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "s", "schema": json.RawMessage(schema)}}
			msg, finish := message(post(t, req))
			content, _ := msg["content"].(string)
			if finish != "stop" {
				t.Fatalf("seed %d: finish %q, content %q", seed, finish, content)
			}
			validate(t, v, content)
		}
	})
	t.Run("responses text.format", func(t *testing.T) {
		schema := constrainedSchemas[19]
		v := compileSchema(t, schema)
		for seed := range 5 {
			b, _ := json.Marshal(map[string]any{"model": modelID, "input": "Answer in JSON.", "temperature": 1, "seed": seed,
				"max_output_tokens": 1200, "reasoning": map[string]any{"effort": "none"},
				"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "s", "schema": json.RawMessage(schema)}}})
			res, err := http.Post(ts.URL+"/v1/responses", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			var out struct {
				Status string `json:"status"`
				Output []struct {
					Type    string `json:"type"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			}
			err = json.NewDecoder(res.Body).Decode(&out)
			res.Body.Close()
			if err != nil || res.StatusCode != 200 || out.Status != "completed" {
				t.Fatalf("seed %d: status %d %q, %v", seed, res.StatusCode, out.Status, err)
			}
			text := ""
			for _, o := range out.Output {
				if o.Type == "message" && len(o.Content) > 0 {
					text = o.Content[0].Text
				}
			}
			validate(t, v, text)
		}
	})
	t.Run("json_object", func(t *testing.T) {
		for seed := range 5 {
			req := request(seed)
			req["response_format"] = map[string]any{"type": "json_object"}
			msg, finish := message(post(t, req))
			content, _ := msg["content"].(string)
			var obj map[string]any
			if err := json.Unmarshal([]byte(content), &obj); err != nil && finish == "stop" {
				t.Errorf("seed %d: %q is not an object: %v", seed, content, err)
			}
		}
	})

	weather := `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"enum":["c","f"]}},"required":["city","days"]}`
	clock := `{"type":"object","properties":{"zone":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["zone"],"additionalProperties":false}`
	tools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": json.RawMessage(weather)}},
		{"type": "function", "function": map[string]any{"name": "get_time", "parameters": json.RawMessage(clock)}},
	}
	validators := map[string]*jsonschema.Schema{"get_weather": compileSchema(t, weather), "get_time": compileSchema(t, clock)}
	for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}} {
		for seed := range 5 {
			t.Run(fmt.Sprintf("tool_choice %v/seed%d", choice, seed), func(t *testing.T) {
				req := request(seed)
				delete(req, "chat_template_kwargs") // a forced call turns thinking off by itself
				req["tools"], req["tool_choice"] = tools, choice
				msg, finish := message(post(t, req))
				calls, _ := msg["tool_calls"].([]any)
				if finish != "tool_calls" || len(calls) != 1 {
					t.Fatalf("finish %q, tool_calls %v, content %v", finish, msg["tool_calls"], msg["content"])
				}
				fn := calls[0].(map[string]any)["function"].(map[string]any)
				name := fn["name"].(string)
				if _, named := choice.(map[string]any); named && name != "get_time" {
					t.Fatalf("called %q, want get_time", name)
				}
				v, ok := validators[name]
				if !ok {
					t.Fatalf("called %q, which is not declared", name)
				}
				validate(t, v, fn["arguments"].(string))
			})
		}
	}
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, text string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%q is not JSON: %v", text, err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%q does not satisfy the schema: %v", text, err)
	}
}
