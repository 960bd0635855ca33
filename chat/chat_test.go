package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const tinyTemplate = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"

// writeFiles creates a directory holding the given files.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// mustRender renders a one-user-message conversation.
func mustRender(t *testing.T, tmpl *Template) string {
	t.Helper()
	out, err := tmpl.Render(Input{Messages: json.RawMessage(`[{"role": "user", "content": "hi"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoad checks where Load finds the template and how it fails.
func TestLoad(t *testing.T) {
	cfg := func(tmpl any) string {
		b, err := json.Marshal(map[string]any{"eos_token": "<|im_end|>", "chat_template": tmpl})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // rendered output, or
		err   string // a substring of the error
	}{
		{name: "jinja file wins", files: map[string]string{"chat_template.jinja": "J" + tinyTemplate, "tokenizer_config.json": cfg("C" + tinyTemplate)}, want: "Juser:hi;"},
		{name: "config string", files: map[string]string{"tokenizer_config.json": cfg("C" + tinyTemplate)}, want: "Cuser:hi;"},
		{name: "config list", files: map[string]string{"tokenizer_config.json": cfg([]map[string]string{
			{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D" + tinyTemplate}})}, want: "Duser:hi;"},
		{name: "config list without default", files: map[string]string{"tokenizer_config.json": cfg([]map[string]string{
			{"name": "tool_use", "template": "T"}, {"name": "rag", "template": "R"}})}, err: `tokenizer_config.json: chat_template has several templates and none named "default" (names: ["tool_use" "rag"])`},
		{name: "config without template", files: map[string]string{"tokenizer_config.json": `{"eos_token": "x"}`}, err: "tokenizer_config.json: no chat_template"},
		{name: "config of another type", files: map[string]string{"tokenizer_config.json": `{"chat_template": 3}`}, err: "tokenizer_config.json: chat_template is neither"},
		{name: "broken config", files: map[string]string{"tokenizer_config.json": `{"chat_template": `}, err: "tokenizer_config.json: invalid JSON"},
		{name: "nothing", files: map[string]string{"config.json": "{}"}, err: "neither chat_template.jinja nor tokenizer_config.json exists"},
		{name: "syntax error in file", files: map[string]string{"chat_template.jinja": "{% if messages %}open"}, err: "chat_template.jinja: chat template syntax"},
		{name: "syntax error in config", files: map[string]string{"tokenizer_config.json": cfg("{{ messages[ }}")}, err: "tokenizer_config.json: chat_template: chat template syntax"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := Load(writeFiles(t, tc.files))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mustRender(t, tmpl); got != tc.want {
				t.Errorf("rendered %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLoadSynthCheckpoint loads the synthetic checkpoint's template the way
// a checkpoint directory holds it.
func TestLoadSynthCheckpoint(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "synth_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Load(writeFiles(t, map[string]string{"chat_template.jinja": string(src)}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(Input{Messages: json.RawMessage(`[{"role": "user", "content": "Hello"}]`), AddGenerationPrompt: true,
		Kwargs: json.RawMessage(`{"enable_thinking": false}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRenderInputErrors checks malformed input is refused before rendering,
// as a plain error, and template failures are *RenderError.
func TestRenderInputErrors(t *testing.T) {
	tmpl, err := Parse(tinyTemplate)
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[{"role": "user", "content": "hi"}]`)
	for _, tc := range []struct {
		name string
		in   Input
		err  string
	}{
		{"no messages", Input{}, "no messages"},
		{"messages not an array", Input{Messages: json.RawMessage(`{"role": "user"}`)}, "messages is not a JSON array"},
		{"messages not JSON", Input{Messages: json.RawMessage(`[{"role": }]`)}, "chat: messages:"},
		{"tools not an array", Input{Messages: msgs, Tools: json.RawMessage(`{"type": "function"}`)}, "tools is not a JSON array"},
		{"tool not an object", Input{Messages: msgs, Tools: json.RawMessage(`["get_weather"]`)}, "every tool must be a JSON object"},
		{"kwargs not an object", Input{Messages: msgs, Kwargs: json.RawMessage(`[true]`)}, "kwargs is not a JSON object"},
		{"kwargs set messages", Input{Messages: msgs, Kwargs: json.RawMessage(`{"messages": []}`)}, `kwargs may not set "messages"`},
		{"kwargs set tools", Input{Messages: msgs, Kwargs: json.RawMessage(`{"tools": []}`)}, `kwargs may not set "tools"`},
	} {
		_, err := tmpl.Render(tc.in)
		var re *RenderError
		if err == nil || !strings.Contains(err.Error(), tc.err) || errors.As(err, &re) {
			t.Errorf("%s: err %v, want a plain error containing %q", tc.name, err, tc.err)
		}
	}

	// null tools and kwargs are the same as none.
	out, err := tmpl.Render(Input{Messages: msgs, Tools: json.RawMessage(`null`), Kwargs: json.RawMessage(`null`)})
	if err != nil || out != "user:hi;" {
		t.Errorf("null tools and kwargs: %q, %v", out, err)
	}
}

// TestRenderError checks raise_exception's message comes back unchanged and
// that kwargs see the special tokens and may shadow them.
func TestRenderError(t *testing.T) {
	tmpl, err := Parse(`{{ bos_token }}{{ eos_token }}{% if fail %}{{ raise_exception('Bad: ' ~ fail) }}{% endif %}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := json.RawMessage(`[]`)
	_, err = tmpl.Render(Input{Messages: msgs, Kwargs: json.RawMessage(`{"fail": "no"}`)})
	var re *RenderError
	if !errors.As(err, &re) || re.Message != "Bad: no" || err.Error() != "chat template: Bad: no" {
		t.Fatalf("err %v, want *RenderError \"Bad: no\"", err)
	}
	out, err := tmpl.Render(Input{Messages: msgs, BOSToken: "<s>", EOSToken: "</s>", Kwargs: json.RawMessage(`{"eos_token": "E"}`)})
	if err != nil || out != "<s>E" {
		t.Errorf("got %q, %v; want \"<s>E\"", out, err)
	}
}

// TestRewrite checks the source rewrite touches filters and output tags
// only, never text, comments, raw blocks or string literals.
func TestRewrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"text | tojson {# x | tojson #}", "text | tojson {# x | tojson #}"},
		{"{{ x|tojson }}", "{{( x|__chat_tojson )|__chat_print}}"},
		{"{{- x | string | trim(' ') -}}", "{{-( x | __chat_string | __chat_trim(' ') )|__chat_print-}}"},
		{"{% set y = x|trimmed|tojsonx|upper %}", "{% set y = x|trimmed|tojsonx|upper %}"},
		{`{{ 'a|tojson' ~ "b\"|trim" }}`, `{{( 'a|tojson' ~ "b\"|trim" )|__chat_print}}`},
		{"{% raw %}{{ x|tojson }}{% endraw %}{{ y }}", "{% raw %}{{ x|tojson }}{% endraw %}{{( y )|__chat_print}}"},
		{"{% if a %}{%- for k in d|items %}{{ k }}{% endfor %}{% endif %}", "{% if a %}{%- for k in d|items %}{{( k )|__chat_print}}{% endfor %}{% endif %}"},
		{"{{ }}", "{{ }}"},
		{"{{ open", "{{ open"},
	} {
		if got := rewrite(tc.in); got != tc.want {
			t.Errorf("rewrite(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got, want := normalizeNewlines("a\r\nb\rc\n\n"), "a\nb\nc\n"; got != want {
		t.Errorf("normalizeNewlines = %q, want %q", got, want)
	}
}

// TestConcurrentRender renders one compiled template from many goroutines.
func TestConcurrentRender(t *testing.T) {
	tmpl := parseFile(t, "Qwen3.6-35B-A3B.jinja")
	cases, golden := loadGolden(t)
	results := golden["Qwen3.6-35B-A3B.jinja"]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range cases {
				want := results[c.Name]
				got, err := tmpl.Render(Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt,
					Kwargs: c.Kwargs, BOSToken: c.BOSToken, EOSToken: c.EOSToken})
				if want.Output != nil && (err != nil || got != *want.Output) {
					t.Errorf("%s: concurrent render differs: %v\n%s", c.Name, err, cmp.Diff(*want.Output, got))
				}
			}
		}()
	}
	wg.Wait()
}

// TestSynthTemplateCurrent keeps the golden copy of the synthetic
// checkpoint's template equal to the one synth writes.
func TestSynthTemplateCurrent(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "synth", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("testdata", "synth_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("synth/chat_template.jinja changed: copy it to testdata/synth_chat_template.jinja and rerun testdata/render_golden.py")
	}
}

// TestEnginePanic checks a panic inside the engine (here strings.Repeat with
// a negative count, where Python gives an empty string) is an error, not a
// crash.
func TestEnginePanic(t *testing.T) {
	tmpl, err := Parse(`{{ 'ab' * n }}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(Input{Messages: json.RawMessage(`[]`), Kwargs: json.RawMessage(`{"n": -1}`)}); !errors.Is(err, errPanic) {
		t.Errorf("err %v, want the engine panic as an error", err)
	}
}
