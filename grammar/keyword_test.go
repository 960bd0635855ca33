package grammar

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// keywordCases: per keyword, strings the grammar must accept and reject.
var keywordCases = []struct {
	name, schema string
	accept       []string
	reject       []string
}{
	{"type object", `{"type":"object"}`, []string{`{}`, `{"a":[1,{"b":null}]}`, ` {"x" : "y"}`}, []string{`[]`, `1`, `{"a"}`, `{,}`}},
	{"type array", `{"type":"array"}`, []string{`[]`, `[1, "a", [true]]`}, []string{`{}`, `[1,]`, `[,1]`}},
	{"type string", `{"type":"string"}`, []string{`""`, `"a\"b\\c\u00e9\n"`, `"日本"`}, []string{`"a`, `'a'`, `"\x"`, "\"\x01\"", `"\ud800"`}},
	{"type number", `{"type":"number"}`, []string{`0`, `-1.5e+10`, `3.25`, `1E5`}, []string{`01`, `.5`, `1.`, `+1`, `-`, `1e`}},
	{"type integer", `{"type":"integer"}`, []string{`0`, `-12`, `900`}, []string{`1.5`, `1e3`, `00`}},
	{"type boolean", `{"type":"boolean"}`, []string{`true`, `false`}, []string{`True`, `1`, `null`}},
	{"type null", `{"type":"null"}`, []string{`null`}, []string{`nul`, `0`}},
	{"type array of types", `{"type":["integer","null"]}`, []string{`5`, `null`}, []string{`"5"`, `5.5`}},
	{"properties required", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`,
		[]string{`{"a":1}`, `{"b":"x","a":2}`}, []string{`{"b":"x"}`, `{"a":"1"}`, `{"a":1,"c":2}`, `{"a":1,"a":2}`}},
	{"additionalProperties false", `{"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":false}`,
		[]string{`{}`, `{"a":null}`}, []string{`{"b":null}`, `{"a":null,}`}},
	{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"}}`,
		[]string{`{"x":1,"y":-2}`}, []string{`{"x":"1"}`}},
	{"enum", `{"enum":["a","b c",1,null,{"k":[1]}]}`, []string{`"a"`, `"b c"`, `1`, `null`, `{"k":[1]}`, `"\u0061"`}, []string{`"c"`, `2`, `"ab"`, `{"k":[2]}`}},
	{"const", `{"const":"x"}`, []string{`"x"`}, []string{`"y"`, `"xx"`}},
	{"anyOf", `{"anyOf":[{"type":"string","maxLength":1},{"type":"integer","minimum":5}]}`, []string{`"a"`, `7`}, []string{`"ab"`, `4`, `null`}},
	{"nested", `{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"array","items":{"type":"boolean"}}},"required":["p"],"additionalProperties":false}},"required":["o"],"additionalProperties":false}`,
		[]string{`{"o":{"p":[true,false]}}`}, []string{`{"o":{}}`, `{"o":{"p":[1]}}`}},
	{"minItems maxItems", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2}`, []string{`[1]`, `[1,2]`}, []string{`[]`, `[1,2,3]`}},
	{"minLength maxLength", `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"日本語"`, `"a\n"`}, []string{`"a"`, `"abcd"`}},
	{"pattern", `{"type":"string","pattern":"^[a-c]+-\\d$"}`, []string{`"ab-1"`, `"c-9"`}, []string{`"ab1"`, `"d-1"`, `"a-12"`}},
	{"pattern unanchored", `{"type":"string","pattern":"xy"}`, []string{`"xy"`, `"axyb"`}, []string{`"x y"`, `""`}},
	{"format date", `{"type":"string","format":"date"}`, []string{`"2024-02-28"`, `"1999-12-31"`}, []string{`"2024-02-30"`, `"2024-04-31"`, `"2024-13-01"`}},
	{"minimum maximum", `{"type":"integer","minimum":-3,"maximum":12}`, []string{`-3`, `0`, `12`, `9`}, []string{`-4`, `13`, `100`, `-30`}},
	{"number bounds", `{"type":"number","minimum":0.5,"maximum":2.5}`, []string{`1`, `1.75`, `2`}, []string{`3`, `0`, `2.6`, `1e0`}},
	{"exclusive bounds", `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`, []string{`0.5`, `0.001`}, []string{`0`, `0.0`, `1`, `-0.5`}},
	{"$ref", `{"$defs":{"n":{"type":"integer","maximum":3}},"type":"array","items":{"$ref":"#/$defs/n"}}`, []string{`[1,2,3]`}, []string{`[4]`}},
	{"allOf of one", `{"allOf":[{"type":"boolean"}]}`, []string{`true`}, []string{`1`}},
}

func TestKeywordsByteByByte(t *testing.T) {
	v := byteVocab(t)
	for _, tc := range keywordCases {
		g, err := JSONSchema([]byte(tc.schema), v)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, s := range tc.accept {
			if !accepts(t, g, s) {
				t.Errorf("%s: %s rejected", tc.name, s)
			}
		}
		for _, s := range tc.reject {
			if accepts(t, g, s) {
				t.Errorf("%s: %s accepted", tc.name, s)
			}
		}
	}
}

// TestKeywordsTokenByToken feeds the accepted strings as the Qwen
// tokenizer encodes them: every token must be in the mask.
func TestKeywordsTokenByToken(t *testing.T) {
	v, tok := qwen(t)
	mask := make([]uint32, v.Words())
	end, _ := tok.ID("<|im_end|>")
	for _, tc := range keywordCases {
		g, err := JSONSchema([]byte(tc.schema), v)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		check := func(s string) bool {
			m := g.NewMatcher()
			for _, id := range tok.Encode(s) {
				m.Mask(mask)
				in := mask[id/32]>>(id%32)&1 == 1
				err := m.Advance(id)
				if in != (err == nil) {
					t.Fatalf("%s: %q token %d: mask %v, Advance %v", tc.name, s, id, in, err)
				}
				if err != nil {
					return false
				}
			}
			m.Mask(mask)
			return mask[end/32]>>(end%32)&1 == 1
		}
		for _, s := range tc.accept {
			if !check(s) {
				t.Errorf("%s: %s rejected", tc.name, s)
			}
		}
		for _, s := range tc.reject {
			if check(s) {
				t.Errorf("%s: %s accepted", tc.name, s)
			}
		}
	}
}

func TestRefused(t *testing.T) {
	v := byteVocab(t)
	tests := []struct{ schema, keyword, path string }{
		{`{"type":"integer","multipleOf":2}`, "multipleOf", "/multipleOf"},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", "/uniqueItems"},
		{`{"type":"string","pattern":"(?=a)"}`, "pattern", "/pattern"},
		{`{"type":"string","pattern":"(a)\\1"}`, "pattern", "/pattern"},
		{`{"type":"string","format":"email"}`, "format", "/format"},
		{`{"type":"object","patternProperties":{"a":{}}}`, "patternProperties", "/patternProperties"},
		{`{"type":"object","properties":{"x":{"not":{}}}}`, "not", "/properties/x/not"},
		{`{"$defs":{"a":{"type":"array","items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`, "$ref", "/$defs/a/items/$ref"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref", "/$ref"},
		{`{"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]}`, "oneOf", "/oneOf"},
		{`{"allOf":[{"type":"string"},{"maxLength":2}]}`, "allOf", "/allOf"},
		{`{"type":"string","if":{}}`, "if", "/if"},
	}
	for _, tc := range tests {
		_, err := JSONSchema([]byte(tc.schema), v)
		var ge *Error
		if !errors.As(err, &ge) {
			t.Errorf("%s: error %v, want *Error", tc.schema, err)
			continue
		}
		if diff := cmp.Diff([]string{tc.keyword, tc.path}, []string{ge.Keyword, ge.Path}); diff != "" {
			t.Errorf("%s: %v (-want +got):\n%s", tc.schema, ge, diff)
		}
	}
	for _, bad := range []string{`{"type":"strin"}`, `{"type":"integer","minimum":3,"maximum":2}`, `[1]`, `false`, `{"type":"string","maxLength":-1}`, `{"required":"a"}`} {
		_, err := JSONSchema([]byte(bad), v)
		var ge *Error
		if !errors.As(err, &ge) || ge.Unsupported() {
			t.Errorf("%s: error %v, want an invalid schema", bad, err)
		}
	}
}

// TestToolCall: the call format, a declared name, valid arguments.
func TestToolCall(t *testing.T) {
	v := byteVocab(t)
	g, err := ToolCall([]Tool{
		{Name: "get", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":5},"n":{"type":"integer","minimum":1}},"required":["city"]}`)},
		{Name: "get_all"},
	}, v)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"<tool_call>\n<function=get>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>":                                true,
		"<tool_call>\n<function=get>\n<parameter=n>\n3\n</parameter>\n<parameter=city>\na\nb\n</parameter>\n</function>\n</tool_call>": true,
		"<tool_call>\n<function=get_all>\n</function>\n</tool_call>":                                                                   true,
		"<tool_call>\n<function=get>\n</function>\n</tool_call>":                                                                       false, // city is required
		"<tool_call>\n<function=put>\n</function>\n</tool_call>":                                                                       false,
		"<tool_call>\n<function=get>\n<parameter=city>\nLondon\n</parameter>\n</function>\n</tool_call>":                               false, // maxLength
		"<tool_call>\n<function=get>\n<parameter=city>\nx\n</parameter>\n<parameter=n>\n0\n</parameter>\n</function>\n</tool_call>":    false, // minimum
		"<tool_call>\n<function=get>\n<parameter=city>\nx\n</parameter>\n<parameter=city>\ny\n</parameter>\n</function>\n</tool_call>": false, // twice
	} {
		if got := accepts(t, g, s); got != want {
			t.Errorf("%q: accepted %v, want %v", s, got, want)
		}
	}
}

// FuzzJSONSchema compiles outside schemas: an error or a grammar whose
// first mask is consistent with Advance, never a panic.
func FuzzJSONSchema(f *testing.F) {
	for _, tc := range keywordCases {
		f.Add(tc.schema, tc.accept[0])
	}
	f.Add(`{"type":"string","pattern":"[\\p{L}]{2,}(x|y)*$"}`, `"ab"`)
	v := byteVocab(f)
	mask := make([]uint32, v.Words())
	f.Fuzz(func(t *testing.T, schema, text string) {
		g, err := JSONSchema([]byte(schema), v)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		m := g.NewMatcher()
		for i := 0; i < len(text) && i < 64; i++ {
			m.Mask(mask)
			in := mask[text[i]/32]>>(text[i]%32)&1 == 1
			if err := m.Advance(int32(text[i])); in != (err == nil) {
				t.Fatalf("byte %d of %q: mask %v, Advance %v", i, text, in, err)
			} else if err != nil {
				return
			}
		}
	})
}

// FuzzToolCall compiles outside tool parameter schemas: an error or a
// grammar whose masks agree with Advance, never a panic.
func FuzzToolCall(f *testing.F) {
	f.Add("get", `{"type":"object","properties":{"city":{"type":"string","maxLength":5},"n":{"type":"integer"}},"required":["city"]}`,
		"<tool_call>\n<function=get>\n<parameter=city>\nab\n</parameter>\n</function>\n</tool_call>")
	f.Add("x", `{}`, "<tool_call>\n<function=x>\n</function>\n</tool_call>")
	v := byteVocab(f)
	mask := make([]uint32, v.Words())
	f.Fuzz(func(t *testing.T, name, params, text string) {
		g, err := ToolCall([]Tool{{Name: name, Parameters: []byte(params)}}, v)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		m := g.NewMatcher()
		for i := 0; i < len(text) && i < 128; i++ {
			m.Mask(mask)
			in := mask[text[i]/32]>>(text[i]%32)&1 == 1
			if err := m.Advance(int32(text[i])); in != (err == nil) {
				t.Fatalf("byte %d of %q: mask %v, Advance %v", i, text, in, err)
			} else if err != nil {
				return
			}
		}
	})
}
