package output

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stops returns options with the given stop strings and thinking off.
func stops(s ...string) Options { return Options{Stop: s} }

var stopCases = []parseCase{
	{name: "stop in content", opts: stops("END"),
		in: "abc END def", want: Result{Content: "abc "}, stopped: true},
	{name: "stop at the start", opts: stops("STOP"),
		in: "STOPxyz", stopped: true},
	{name: "no match", opts: stops("STOP"),
		in: "abc ST", want: Result{Content: "abc ST"}},
	{name: "empty stop string ignored", opts: stops("", "zz"),
		in: "abc", want: Result{Content: "abc"}},
	{name: "multibyte stop", opts: stops("日本"),
		in: "こんにちは日本語", want: Result{Content: "こんにちは"}, stopped: true},
	{name: "first of several", opts: stops("two", "one"),
		in: "zero one two", want: Result{Content: "zero "}, stopped: true},
	{name: "overlapping stops: the one ending first wins", opts: stops("abc", "b"),
		in: "xabc", want: Result{Content: "xa"}, stopped: true},
	{name: "overlapping stops ending together: the longer wins", opts: stops("bc", "abc"),
		in: "xabc", want: Result{Content: "x"}, stopped: true},
	{name: "not matched in reasoning", opts: Options{StartInReasoning: true, Stop: []string{"STOP"}},
		in:   "think STOP</think>ans STOP more",
		want: Result{Reasoning: "think STOP", Content: "ans "}, stopped: true},
	{name: "not matched in the newlines after think", opts: Options{StartInReasoning: true, Stop: []string{"\n"}},
		in:   "r</think>\n\nline1\nline2",
		want: Result{Reasoning: "r", Content: "line1"}, stopped: true},
	{name: "not matched inside a tool call", opts: Options{Tools: weatherTools, Stop: []string{"city", "Paris", "<tool"}},
		in:   call("get_weather", "city", "Paris"),
		want: Result{ToolCalls: calls("get_weather", `{"city": "Paris"}`)}},
	{name: "matched inside tool-call text when tools are off", opts: stops("call"),
		in: "x <tool_call>", want: Result{Content: "x <tool_"}, stopped: true},
	{name: "marker prefix that is no marker", opts: Options{Tools: weatherTools, Stop: []string{"<tool"}},
		in: "a <tooling>", want: Result{Content: "a "}, stopped: true},
	{name: "whitespace dropped before a call is not matched", opts: Options{Tools: weatherTools, Stop: []string{"\n\n"}},
		in:   "Hi\n\n" + call("get_weather", "city", "x"),
		want: Result{Content: "Hi", ToolCalls: calls("get_weather", `{"city": "x"}`)}},
	{name: "not matched across a call", opts: Options{Tools: weatherTools, Stop: []string{"AB"}},
		in:   "A" + call("f") + "B",
		want: Result{Content: "AB", ToolCalls: calls("f", "{}")}},
	{name: "malformed block text is content", opts: Options{Tools: weatherTools, Stop: []string{"call>oops"}},
		in: "<tool_call>oops", stopped: true, want: Result{Content: "<tool_"}},
	{name: "nothing after the stop", opts: Options{Tools: weatherTools, Stop: []string{"STOP"}},
		in: "x STOP " + call("f") + "more", want: Result{Content: "x "}, stopped: true},
	{name: "stop completed at Close", opts: Options{Tools: weatherTools, Stop: []string{"a <"}},
		in: "a <", want: Result{}, stopped: true},
	{name: "think at start then stop", opts: stops("x"),
		in: "<think>xx</think>ax", want: Result{Reasoning: "xx", Content: "a"}, stopped: true},
}

func TestStopStrings(t *testing.T) { runCases(t, stopCases) }

// TestStopAcrossPieces checks a match that spans Write calls and that the
// rest of the matching piece is dropped.
func TestStopAcrossPieces(t *testing.T) {
	p := New(stops("<|stop|>"))
	var got Result
	for _, s := range []string{"Hello <|", "st", "op|> and more", "never"} {
		got.Add(p.Write(s)...)
	}
	got.Add(p.Close()...)
	if d := cmp.Diff(Result{Content: "Hello "}, got); d != "" || !p.Stopped() {
		t.Errorf("Result (-want +got):\n%s\nStopped %v", d, p.Stopped())
	}
}
