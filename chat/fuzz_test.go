package chat

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzRender feeds arbitrary messages, tools and kwargs JSON to the real
// templates: rendering may fail, but never panics, and what it produces is
// valid UTF-8 and the same every time.
func FuzzRender(f *testing.F) {
	cases, _ := loadGolden(f)
	for _, c := range cases {
		f.Add([]byte(c.Messages), []byte(c.Tools), []byte(c.Kwargs), c.AddGenerationPrompt)
	}
	f.Add([]byte(`[{"role": "user", "content": [1, {"text": null}, "x"]}]`), []byte(`[{}]`), []byte(`{"preserve_thinking": 1}`), false)
	f.Add([]byte(`[{"role": "assistant", "tool_calls": [{"function": {"arguments": [1]}}, 3, null]}, {"role": "user"}]`), []byte(nil), []byte(`{}`), true)
	f.Add([]byte(`[{"role": ["user"], "content": {"a": 1}, "reasoning_content": 5}]`), []byte(`null`), []byte(`{"enable_thinking": "no"}`), true)

	var templates []*Template
	for _, name := range []string{"Qwen3.6-35B-A3B.jinja", "Qwen3.5-35B-A3B.jinja", "synth_chat_template.jinja", "probe_template.jinja"} {
		templates = append(templates, parseFile(f, name))
	}
	f.Fuzz(func(t *testing.T, messages, tools, kwargs []byte, agp bool) {
		in := Input{Messages: json.RawMessage(messages), Tools: json.RawMessage(tools), Kwargs: json.RawMessage(kwargs),
			AddGenerationPrompt: agp, EOSToken: "<|im_end|>"}
		for _, tmpl := range templates {
			out, err := tmpl.Render(in)
			if errors.Is(err, errPanic) {
				t.Fatal(err)
			}
			if err != nil {
				continue
			}
			if !utf8.ValidString(out) {
				t.Errorf("output is not valid UTF-8: %q", out)
			}
			again, err := tmpl.Render(in)
			if err != nil || again != out {
				t.Errorf("second render differs: %v\n%q\n%q", err, out, again)
			}
		}
	})
}
