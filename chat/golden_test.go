package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goldenCase is one entry of testdata/cases.json, its fields kept as raw
// JSON so the renderer sees exactly the bytes Python's json.load read.
type goldenCase struct {
	Name                string          `json:"name"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Kwargs              json.RawMessage `json:"kwargs"`
	BOSToken            string          `json:"bos_token"`
	EOSToken            string          `json:"eos_token"`
}

// goldenResult is what Python jinja2 produced for one case: the prompt or
// the error message.
type goldenResult struct {
	Output *string `json:"output"`
	Error  *string `json:"error"`
}

// loadGolden reads the cases and the results render_golden.py wrote.
func loadGolden(t testing.TB) ([]goldenCase, map[string]map[string]goldenResult) {
	t.Helper()
	var cases []goldenCase
	readJSON(t, filepath.Join("testdata", "cases.json"), &cases)
	var golden struct {
		Templates map[string]map[string]goldenResult `json:"templates"`
	}
	readJSON(t, filepath.Join("testdata", "golden.json"), &golden)
	if len(cases) == 0 || len(golden.Templates) == 0 {
		t.Fatal("no cases or no golden results")
	}
	return cases, golden.Templates
}

// readJSON unmarshals the file at path into v.
func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// parseFile compiles the template testdata/name.
func parseFile(t testing.TB, name string) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tmpl
}

// TestGolden renders every case with every template and compares with what
// Python jinja2, set up as transformers sets it up, produced: the same bytes,
// or a *RenderError with the same message.
func TestGolden(t *testing.T) {
	cases, golden := loadGolden(t)
	for name, results := range golden {
		tmpl := parseFile(t, name)
		for _, c := range cases {
			t.Run(name+"/"+c.Name, func(t *testing.T) {
				want, ok := results[c.Name]
				if !ok {
					t.Fatal("no golden result; rerun testdata/render_golden.py")
				}
				got, err := tmpl.Render(Input{
					Messages:            c.Messages,
					Tools:               c.Tools,
					AddGenerationPrompt: c.AddGenerationPrompt,
					Kwargs:              c.Kwargs,
					BOSToken:            c.BOSToken,
					EOSToken:            c.EOSToken,
				})
				switch {
				case want.Output != nil:
					if err != nil {
						t.Fatalf("error %v, want output\n%s", err, *want.Output)
					}
					if diff := cmp.Diff(*want.Output, got); diff != "" {
						t.Errorf("output differs from jinja2 (-jinja2 +go):\n%s", diff)
					}
				case want.Error != nil:
					var re *RenderError
					if !errors.As(err, &re) {
						t.Fatalf("got %q, %v; want *RenderError %q", got, err, *want.Error)
					}
					if diff := cmp.Diff(*want.Error, re.Message); diff != "" {
						t.Errorf("error message differs from jinja2 (-jinja2 +go):\n%s", diff)
					}
				default:
					t.Fatal("golden result has neither output nor error")
				}
			})
		}
	}
}

// BenchmarkRender renders the Qwen3.6 template for the agentic case with
// tools, tool calls and tool responses.
func BenchmarkRender(b *testing.B) {
	tmpl := parseFile(b, "Qwen3.6-35B-A3B.jinja")
	var cases []goldenCase
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		b.Fatal(err)
	}
	for _, c := range cases {
		if c.Name != "tool_calls_nested_arguments" {
			continue
		}
		in := Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: true}
		for b.Loop() {
			if _, err := tmpl.Render(in); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.Fatal("case not found")
}
