package output

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var weatherTools = []ToolSchema{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {
		"city": {"type": "string"},
		"days": {"type": "integer"},
		"ratio": {"type": "number"},
		"metric": {"type": "boolean"},
		"opts": {"type": "object"},
		"tags": {"type": "array", "items": {"type": "string"}},
		"nothing": {"type": "null"},
		"either": {"type": ["integer", "null"]},
		"unit": {"enum": ["c", "f"]},
		"level": {"enum": [1, 2]},
		"alt": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
		"name": {"anyOf": [{"type": "string"}]}
	}}`)},
	{Name: "write_file", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}`)},
	{Name: "no_schema"},
	{Name: "bad_schema", Parameters: json.RawMessage(`{"properties": [`)},
}

// call renders a tool call the way the chat template does (SPEC §7 item 5).
func call(name string, kv ...string) string {
	s := "<tool_call>\n<function=" + name + ">\n"
	for i := 0; i+1 < len(kv); i += 2 {
		s += "<parameter=" + kv[i] + ">\n" + kv[i+1] + "\n</parameter>\n"
	}
	return s + "</function>\n</tool_call>"
}

// calls builds the expected ToolCalls, ids from counterIDs.
func calls(nameArgs ...string) []ToolCall {
	var cs []ToolCall
	for i := 0; i+1 < len(nameArgs); i += 2 {
		cs = append(cs, ToolCall{Index: i / 2, ID: "id" + string(rune('1'+i/2)), Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return cs
}

var tools = Options{Tools: weatherTools}

var toolCases = []parseCase{
	{name: "string parameter", opts: tools,
		in:   call("get_weather", "city", "Paris"),
		want: Result{ToolCalls: calls("get_weather", `{"city": "Paris"}`)}},
	{name: "reasoning then call", opts: Options{StartInReasoning: true, Tools: weatherTools},
		in:   "I should look it up.\n</think>\n\n" + call("get_weather", "city", "Paris"),
		want: Result{Reasoning: "I should look it up.", ToolCalls: calls("get_weather", `{"city": "Paris"}`)}},
	{name: "typed parameters", opts: tools,
		in: call("get_weather", "days", "3", "ratio", "1.5e3", "metric", "true", "opts", `{"a": 1, "b": [1, 2], "名": "值"}`,
			"tags", "[\"x\",\n \"y\"]", "nothing", "null", "either", "null", "level", "2", "alt", "7"),
		want: Result{ToolCalls: calls("get_weather",
			`{"days": 3, "ratio": 1.5e3, "metric": true, "opts": {"a":1,"b":[1,2],"名":"值"}, "tags": ["x","y"], "nothing": null, "either": null, "level": 2, "alt": 7}`)}},
	{name: "typed value with surrounding blanks", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=days>\n  42 \n\n</parameter>\n</function>\n</tool_call>",
		want: Result{ToolCalls: calls("get_weather", `{"days": 42}`)}},
	{name: "typed values that do not decode stay strings", opts: tools,
		in:   call("get_weather", "days", "three", "opts", "{broken", "metric", "", "alt", "x y", "ratio", "NaN"),
		want: Result{ToolCalls: calls("get_weather", `{"days": "three", "opts": "{broken", "metric": "", "alt": "x y", "ratio": "NaN"}`)}},
	{name: "typed value with invalid UTF-8 stays a string", opts: tools,
		in:   call("get_weather", "opts", "\"\xff\""),
		want: Result{ToolCalls: calls("get_weather", `{"opts": "\"\ufffd\""}`)}},
	{name: "string-typed values are not decoded", opts: tools,
		in:   call("get_weather", "city", "123", "unit", "c", "name", "null"),
		want: Result{ToolCalls: calls("get_weather", `{"city": "123", "unit": "c", "name": "null"}`)}},
	{name: "multi-line string with escaping", opts: tools,
		in: call("write_file", "path", `C:\dir\"a".txt`,
			"content", "line 1\n\t\"quoted\" \\ back\r\n€ 日本 😀\x01\x1f\u2028end"),
		want: Result{ToolCalls: calls("write_file",
			`{"path": "C:\\dir\\\"a\".txt", "content": "line 1\n\t\"quoted\" \\ back\r\n€ 日本 😀\u0001\u001f\u2028end"}`)}},
	{name: "only one newline stripped at each end", opts: tools,
		in:   call("write_file", "content", "\nx\n"),
		want: Result{ToolCalls: calls("write_file", `{"content": "\nx\n"}`)}},
	{name: "empty string value", opts: tools,
		in:   call("write_file", "content", ""),
		want: Result{ToolCalls: calls("write_file", `{"content": ""}`)}},
	{name: "value on the tag line", opts: tools,
		in:   "<tool_call><function=get_weather><parameter=city>Paris</parameter><parameter=days>2</parameter></function></tool_call>",
		want: Result{ToolCalls: calls("get_weather", `{"city": "Paris", "days": 2}`)}},
	{name: "value holding tag look-alikes", opts: tools,
		in:   call("write_file", "content", "<parameter=x>\n</param\n</function>\n<tool_call>"),
		want: Result{ToolCalls: calls("write_file", `{"content": "<parameter=x>\n</param\n</function>\n<tool_call>"}`)}},
	{name: "invalid UTF-8 in a string value", opts: tools,
		in:   call("write_file", "content", "a\xffb\xe6\x97"),
		want: Result{ToolCalls: calls("write_file", `{"content": "a\ufffdb\ufffd\ufffd"}`)}},
	{name: "no parameters", opts: tools,
		in:   call("get_weather"),
		want: Result{ToolCalls: calls("get_weather", `{}`)}},
	{name: "two consecutive calls", opts: tools,
		in:   call("get_weather", "city", "Paris") + "\n" + call("get_weather", "city", "Rome", "days", "1"),
		want: Result{ToolCalls: calls("get_weather", `{"city": "Paris"}`, "get_weather", `{"city": "Rome", "days": 1}`)}},
	{name: "content then a call", opts: tools,
		in:   "Let me check.\n\n" + call("get_weather", "city", "Paris"),
		want: Result{Content: "Let me check.", ToolCalls: calls("get_weather", `{"city": "Paris"}`)}},
	{name: "content after a call", opts: tools,
		in:   "A:\n" + call("get_weather", "city", "Paris") + "\n\nDone.\n",
		want: Result{Content: "A:Done.\n", ToolCalls: calls("get_weather", `{"city": "Paris"}`)}},
	{name: "unknown function and parameter are strings", opts: tools,
		in: call("other", "n", "5") + call("get_weather", "town", "5") +
			call("no_schema", "n", "5") + call("bad_schema", "n", "5"),
		want: Result{ToolCalls: calls("other", `{"n": "5"}`, "get_weather", `{"town": "5"}`,
			"no_schema", `{"n": "5"}`, "bad_schema", `{"n": "5"}`)}},
	{name: "empty tool list still parses calls", opts: Options{Tools: []ToolSchema{}},
		in:   call("f", "a", "1"),
		want: Result{ToolCalls: calls("f", `{"a": "1"}`)}},
	{name: "stray text between parameters dropped", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\nnoise <b>\n<parameter=city>\nx\n</parameter>\n<parameter=\nbad>\n</function>\n</tool_call>",
		want: Result{ToolCalls: calls("get_weather", `{"city": "x"}`)}},
	{name: "missing function close", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n</tool_call>\nok",
		want: Result{Content: "ok", ToolCalls: calls("get_weather", `{"city": "x"}`)}},
	{name: "missing tool_call close", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n</function>\nafter",
		want: Result{Content: "after", ToolCalls: calls("get_weather", `{}`)}},
	{name: "missing tool_call close at end", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n</function>\n</tool_",
		want: Result{ToolCalls: calls("get_weather", `{}`)}},
	{name: "malformed block is content", opts: tools,
		in:   "Hi\n<tool_call>\nhello</tool_call>",
		want: Result{Content: "Hi\n<tool_call>\nhello</tool_call>"}},
	{name: "malformed name is content", opts: tools,
		in:   "<tool_call>\n<function=a\nb>\n</function>",
		want: Result{Content: "<tool_call>\n<function=a\nb>\n</function>"}},
	{name: "empty name is content", opts: tools,
		in:   "<tool_call><function= >",
		want: Result{Content: "<tool_call><function= >"}},
	{name: "tag mentioned in prose", opts: tools,
		in:   "use <tool_call> tags",
		want: Result{Content: "use <tool_call> tags"}},
	{name: "malformed then a real call", opts: tools,
		in:   "<tool_call>oops " + call("get_weather", "city", "x"),
		want: Result{Content: "<tool_call>oops", ToolCalls: calls("get_weather", `{"city": "x"}`)}},
	{name: "unterminated before the name is content", opts: tools,
		in:   "Hi <tool_call>\n<function=get_wea",
		want: Result{Content: "Hi <tool_call>\n<function=get_wea"}},
	{name: "unterminated open tag is content", opts: tools,
		in:   "Hi <tool_ca",
		want: Result{Content: "Hi <tool_ca"}},
	{name: "unterminated string value", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
		want: Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "Par"}`, Unterminated: true}}}},
	{name: "unterminated inside the parameter close", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</param",
		want: Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "Paris"}`, Unterminated: true}}}},
	{name: "unterminated before the value", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=city>\n",
		want: Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": ""}`, Unterminated: true}}}},
	{name: "unterminated typed value", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n<parameter=days>\n3\n",
		want: Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "x", "days": 3}`, Unterminated: true}}}},
	{name: "unterminated inside a parameter tag", opts: tools,
		in:   "<tool_call>\n<function=get_weather>\n<parameter=ci",
		want: Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{}`, Unterminated: true}}}},
	{name: "unterminated second call", opts: tools,
		in: call("get_weather", "city", "a") + "\n<tool_call>\n<function=write_file>\n<parameter=content>\nabc\n",
		want: Result{ToolCalls: []ToolCall{
			{ID: "id1", Name: "get_weather", Arguments: `{"city": "a"}`},
			{Index: 1, ID: "id2", Name: "write_file", Arguments: `{"content": "abc"}`, Unterminated: true}}}},
}

func TestToolCalls(t *testing.T) { runCases(t, toolCases) }

// TestDefaultCallIDs checks ids when the caller gives no generator.
func TestDefaultCallIDs(t *testing.T) {
	p := New(tools)
	var got Result
	got.Add(p.Write(call("f") + call("g"))...)
	got.Add(p.Close()...)
	want := []ToolCall{{ID: "call_0", Name: "f", Arguments: "{}"}, {Index: 1, ID: "call_1", Name: "g", Arguments: "{}"}}
	if d := cmp.Diff(want, got.ToolCalls); d != "" {
		t.Errorf("ToolCalls (-want +got):\n%s", d)
	}
}

// TestStreamedArguments checks a string value streams character by
// character and the fragments join to the final JSON.
func TestStreamedArguments(t *testing.T) {
	p := New(Options{Tools: weatherTools, NewCallID: counterIDs()})
	var frags []string
	in := call("write_file", "content", "a\"b")
	for i := range len(in) {
		for _, e := range p.Write(in[i : i+1]) {
			if e.Kind == ToolCallArguments {
				frags = append(frags, e.Text)
			}
		}
	}
	want := []string{"{", `"content": "`, "a", `\"`, "b", `"`, "}"}
	if d := cmp.Diff(want, frags); d != "" {
		t.Errorf("fragments (-want +got):\n%s", d)
	}
}
