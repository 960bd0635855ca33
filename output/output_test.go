package output

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// parseCase is one model output and the message it must become.
type parseCase struct {
	name    string
	opts    Options // NewCallID is set by parse
	in      string
	want    Result
	stopped bool
}

// counterIDs numbers tool calls id1, id2, … so results are reproducible.
func counterIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("id%d", n)
	}
}

// parse feeds the pieces to a fresh Parser, closes it and returns the
// accumulated Result, Stopped and every event.
func parse(o Options, pieces ...string) (Result, bool, []Event) {
	o.NewCallID = counterIDs()
	p := New(o)
	var evs []Event
	for _, s := range pieces {
		evs = append(evs, p.Write(s)...)
	}
	evs = append(evs, p.Close()...)
	var r Result
	r.Add(evs...)
	return r, p.Stopped(), evs
}

// checkEvents verifies the event stream's shape: tool events refer to a
// started call, every call's arguments are valid UTF-8 JSON, and
// HasToolCalls-worthy starts carry an id and a name.
func checkEvents(t *testing.T, evs []Event) {
	t.Helper()
	started := map[int]bool{}
	args := map[int]string{}
	for _, e := range evs {
		switch e.Kind {
		case ToolCallStart:
			if started[e.Index] || e.ID == "" || e.Name == "" {
				t.Errorf("bad ToolCallStart %+v", e)
			}
			started[e.Index] = true
		case ToolCallArguments:
			if !started[e.Index] {
				t.Errorf("arguments before start: %+v", e)
			}
			args[e.Index] += e.Text
		}
	}
	for i, a := range args {
		if !utf8.ValidString(a) || !json.Valid([]byte(a)) {
			t.Errorf("call %d: arguments are not valid JSON: %q", i, a)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(a), &m); err != nil {
			t.Errorf("call %d: arguments are not an object: %v", i, err)
		}
	}
}

// runCases checks each case fed in one Write; split_test.go checks every
// case fed in pieces.
func runCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, stopped, evs := parse(c.opts, c.in)
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("Result (-want +got):\n%s", d)
			}
			if stopped != c.stopped {
				t.Errorf("Stopped = %v, want %v", stopped, c.stopped)
			}
			checkEvents(t, evs)
		})
	}
}

var (
	thinkOn  = Options{StartInReasoning: true}
	thinkOff = Options{}
)

var reasoningCases = []parseCase{
	{name: "thinking on", opts: thinkOn,
		in:   "Let me think.\n\n</think>\n\nThe answer is 4.",
		want: Result{Reasoning: "Let me think.", Content: "The answer is 4."}},
	{name: "extra leading newline in reasoning", opts: thinkOn,
		in:   "\nOkay.\n</think>\n\nHi",
		want: Result{Reasoning: "Okay.", Content: "Hi"}},
	{name: "inner whitespace kept", opts: thinkOn,
		in:   "a\n\nb  \n</think>c \n",
		want: Result{Reasoning: "a\n\nb", Content: "c \n"}},
	{name: "empty reasoning", opts: thinkOn,
		in:   "</think>\n\nHi",
		want: Result{Content: "Hi"}},
	{name: "unterminated reasoning", opts: thinkOn,
		in:   "still thinking\n\n",
		want: Result{Reasoning: "still thinking"}},
	{name: "unterminated reasoning cut inside the close tag", opts: thinkOn,
		in:   "abc\n</thi",
		want: Result{Reasoning: "abc\n</thi"}},
	{name: "close tag look-alike", opts: thinkOn,
		in:   "a </thinking> b</think>c",
		want: Result{Reasoning: "a </thinking> b", Content: "c"}},
	{name: "multibyte", opts: thinkOn,
		in:   "思考…\n</think>\n\n答案😀",
		want: Result{Reasoning: "思考…", Content: "答案😀"}},
	{name: "tool call inside reasoning is reasoning", opts: Options{StartInReasoning: true, Tools: weatherTools},
		in:   "maybe " + call("get_weather", "city", "Paris") + "\n</think>\n\nNo call.",
		want: Result{Reasoning: "maybe " + call("get_weather", "city", "Paris"), Content: "No call."}},
	{name: "thinking off", opts: thinkOff,
		in:   "Hello\nworld",
		want: Result{Content: "Hello\nworld"}},
	{name: "thinking off drops leading newlines", opts: thinkOff,
		in:   "\n\n  Hello",
		want: Result{Content: "  Hello"}},
	{name: "think opened at content start", opts: thinkOff,
		in:   "<think>\nhmm\n</think>\n\nAnswer",
		want: Result{Reasoning: "hmm", Content: "Answer"}},
	{name: "think opened after a newline", opts: thinkOff,
		in:   "\n<think>x</think>y",
		want: Result{Reasoning: "x", Content: "y"}},
	{name: "think later in content is content", opts: thinkOff,
		in:   "a <think>b</think>",
		want: Result{Content: "a <think>b</think>"}},
	{name: "think look-alike at start", opts: thinkOff,
		in:   "<thinking is fun>",
		want: Result{Content: "<thinking is fun>"}},
	{name: "think prefix at close", opts: thinkOff,
		in:   "<thi",
		want: Result{Content: "<thi"}},
	{name: "close tag in content is content", opts: thinkOff,
		in:   "x</think>y",
		want: Result{Content: "x</think>y"}},
	{name: "empty output thinking on", opts: thinkOn},
	{name: "empty output thinking off", opts: thinkOff},
	{name: "only newlines", opts: thinkOff, in: "\n\n"},
	{name: "tools nil keeps tool-call text", opts: thinkOff,
		in:   "Sure.\n\n" + call("get_weather", "city", "Paris"),
		want: Result{Content: "Sure.\n\n" + call("get_weather", "city", "Paris")}},
	{name: "trailing whitespace kept without a call", opts: Options{Tools: weatherTools},
		in:   "Hi \n\n",
		want: Result{Content: "Hi \n\n"}},
}

func TestReasoningAndContent(t *testing.T) { runCases(t, reasoningCases) }

// TestHoldsBackOnlyWhatItMust checks what is emitted before Close: exactly
// the text that cannot still turn into a marker, a stop string or trimmed
// whitespace.
func TestHoldsBackOnlyWhatItMust(t *testing.T) {
	tools := Options{Tools: weatherTools}
	open := "<tool_call>\n<function=get_weather>\n"
	cases := []struct {
		name   string
		opts   Options
		pieces []string
		want   Result
		held   int
	}{
		{"plain content", tools, []string{"Hello"}, Result{Content: "Hello"}, 0},
		{"possible tool call", tools, []string{"Hello <"}, Result{Content: "Hello"}, 2},
		{"possible tool call grows", tools, []string{"Hello <", "tool_"}, Result{Content: "Hello"}, 7},
		{"not a tool call", tools, []string{"Hello <", "b>"}, Result{Content: "Hello <b>"}, 0},
		{"no tools hold nothing", thinkOff, []string{"Hi ", "Hello <"}, Result{Content: "Hi Hello <"}, 0},
		{"reasoning streams", thinkOn, []string{"abc", " def"}, Result{Reasoning: "abc def"}, 0},
		{"reasoning trailing newlines", thinkOn, []string{"abc\n\n"}, Result{Reasoning: "abc"}, 2},
		{"reasoning possible close", thinkOn, []string{"abc</th"}, Result{Reasoning: "abc"}, 4},
		{"reasoning tool call is text", Options{StartInReasoning: true, Tools: weatherTools}, []string{"a <tool_call>"}, Result{Reasoning: "a <tool_call>"}, 0},
		{"newlines after think", thinkOn, []string{"r</think>\n\n"}, Result{Reasoning: "r"}, 0},
		{"possible think at start", thinkOff, []string{"<thi"}, Result{}, 4},
		{"stop prefix", Options{Stop: []string{"STOP"}}, []string{"abc ST"}, Result{Content: "abc "}, 2},
		{"function name pending", tools, []string{"<tool_call>\n<function=get_w"}, Result{}, 27},
		{"string value streams", tools, []string{open + "<parameter=city>\nPar"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "Par`}}}, 0},
		{"string value possible end", tools, []string{open + "<parameter=city>\nParis\n</para"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "Paris`}}}, 7},
		{"string value incomplete rune", tools, []string{open + "<parameter=city>\nab\xe6\x97"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "ab`}}}, 2},
		{"string value leading newline pending", tools, []string{open + "<parameter=city>"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"city": "`}}}, 0},
		{"number value buffered", tools, []string{open + "<parameter=days>\n4"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{"days": `}}}, 2},
		{"call closed", tools, []string{open + "</function>"},
			Result{ToolCalls: []ToolCall{{ID: "id1", Name: "get_weather", Arguments: `{}`}}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts
			o.NewCallID = counterIDs()
			p := New(o)
			var got Result
			for _, s := range c.pieces {
				got.Add(p.Write(s)...)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("emitted before Close (-want +got):\n%s", d)
			}
			if h := p.held(); h != c.held {
				t.Errorf("held %d bytes, want %d", h, c.held)
			}
		})
	}
}

// TestAfterClose checks that a closed or stopped parser emits nothing more.
func TestAfterClose(t *testing.T) {
	p := New(thinkOff)
	p.Write("a")
	p.Close()
	if evs := append(p.Write("b"), p.Close()...); len(evs) != 0 {
		t.Errorf("events after Close: %+v", evs)
	}
	p = New(Options{Stop: []string{"x"}})
	p.Write("axb")
	if evs := append(p.Write("c"), p.Close()...); len(evs) != 0 || !p.Stopped() {
		t.Errorf("events after stop: %+v, Stopped %v", evs, p.Stopped())
	}
}

// TestEventsMerged checks one Write gives one delta per stream, so the
// server sends one chunk per token.
func TestEventsMerged(t *testing.T) {
	p := New(Options{StartInReasoning: true, Tools: weatherTools, NewCallID: counterIDs()})
	got := p.Write("r</think>\n\nSee:\n" + call("get_weather", "city", "Oslo", "days", "2"))
	want := []Event{
		{Kind: Reasoning, Text: "r"},
		{Kind: Content, Text: "See:"},
		{Kind: ToolCallStart, ID: "id1", Name: "get_weather"},
		{Kind: ToolCallArguments, Text: `{"city": "Oslo", "days": 2}`},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if !p.HasToolCalls() {
		t.Error("HasToolCalls = false")
	}
}

func TestKindString(t *testing.T) {
	got := strings.Join([]string{Reasoning.String(), Content.String(), ToolCallStart.String(), ToolCallArguments.String(), Kind(9).String()}, " ")
	if want := "Reasoning Content ToolCallStart ToolCallArguments Kind(9)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRaw(t *testing.T) {
	p := New(Options{Raw: true, Stop: []string{"END"}, Tools: []ToolSchema{{Name: "f"}}})
	var r Result
	for _, piece := range []string{"\n\n<think>a", "</think> <tool_call>\n<function=f>", " x EN", "D tail"} {
		r.Add(p.Write(piece)...)
	}
	r.Add(p.Close()...)
	want := Result{Content: "\n\n<think>a</think> <tool_call>\n<function=f> x "}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("raw (-want +got):\n%s", diff)
	}
	if !p.Stopped() {
		t.Error("stop string not seen")
	}
}
