package output

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// piece is one token of a test stream: text, or a control token.
type piece struct {
	text    string
	control bool
}

func txt(s string) piece { return piece{text: s} }
func ctl(s string) piece { return piece{text: s, control: true} }
func feed(p *Parser, ps []piece) Result {
	var r Result
	for _, x := range ps {
		if x.control {
			r.Add(p.Control(x.text)...)
		} else {
			r.Add(p.Write(x.text)...)
		}
	}
	r.Add(p.Close()...)
	return r
}

func TestControl(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		in   []piece
		want Result
	}{
		{"the reasoning closes on </think>", Options{StartInReasoning: true},
			[]piece{txt("Hm."), ctl("</think>"), txt("\n\n"), txt("Yes.")}, Result{Reasoning: "Hm.", Content: "Yes."}},
		{"a stray </think> in the answer is dropped", Options{StartInReasoning: true},
			[]piece{txt("Hm."), ctl("</think>"), txt("\n\nYes"), ctl("</think>"), txt(" sir.")}, Result{Reasoning: "Hm.", Content: "Yes sir."}},
		{"fim tokens are dropped everywhere", Options{StartInReasoning: true},
			[]piece{txt("a"), ctl("<|fim_pad|>"), txt("b"), ctl("</think>"), txt("c"), ctl("<|fim_middle|>"), txt("d")}, Result{Reasoning: "ab", Content: "cd"}},
		{"a leading <think> opens the reasoning", Options{},
			[]piece{ctl("<think>"), txt("x"), ctl("</think>"), txt("y")}, Result{Reasoning: "x", Content: "y"}},
		{"a late <think> is dropped", Options{},
			[]piece{txt("y"), ctl("<think>"), txt("z")}, Result{Content: "yz"}},
		{"tool-call tags stay readable without tools", Options{},
			[]piece{txt("a "), ctl("<tool_call>"), txt("x"), ctl("</tool_call>")}, Result{Content: "a <tool_call>x</tool_call>"}},
		{"tool-call tags make a call with tools", Options{Tools: weatherTools},
			[]piece{ctl("<tool_call>"), txt("\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"), ctl("</tool_call>"), ctl("<|fim_pad|>")},
			Result{ToolCalls: []ToolCall{{Index: 0, ID: "call_0", Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
		{"raw text keeps the reasoning tags, drops the rest", Options{Raw: true},
			[]piece{txt("a"), ctl("</think>"), ctl("<|fim_pad|>"), ctl("<think>"), txt("b")}, Result{Content: "a</think><think>b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, feed(New(tt.o), tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// controls are the control tokens FuzzControl mixes into text.
var controls = []string{"<think>", "</think>", "<tool_call>", "</tool_call>", "<|fim_pad|>", "<tool_response>", "<|file_sep|>"}

// FuzzControl feeds text mixed with control tokens: no control token other
// than the tool-call tags may reach the text, and no "</think>" the model
// wrote as a control token may appear in the answer.
func FuzzControl(f *testing.F) {
	f.Add("Hm.|1|Yes|4|no", uint8(1))
	f.Add("|0|x|1|y|2|<function=get_weather>|3|", uint8(2))
	f.Fuzz(func(t *testing.T, in string, flags uint8) {
		o := Options{StartInReasoning: flags&1 != 0, Raw: flags&4 != 0}
		if flags&2 != 0 {
			o.Tools = weatherTools
		}
		var ps []piece
		for i, part := range strings.Split(in, "|") {
			if i%2 == 1 && len(part) == 1 && part[0] >= '0' && int(part[0]-'0') < len(controls) {
				ps = append(ps, ctl(controls[part[0]-'0']))
				continue
			}
			// Text holds no markup of its own here: only control tokens do.
			ps = append(ps, txt(strings.NewReplacer("<", "", ">", "").Replace(part)))
		}
		r := feed(New(o), ps)
		all := r.Reasoning + r.Content
		for _, c := range controls[4:] {
			if strings.Contains(all, c) {
				t.Fatalf("%q reached the text: %+v", c, r)
			}
		}
		if !o.Raw && strings.Contains(r.Content, "</think>") {
			t.Fatalf("a </think> reached the answer: %+v", r)
		}
	})
}
