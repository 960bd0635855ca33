package chat

import (
	"math"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
	"github.com/google/go-cmp/cmp"
)

// The expected strings below are what CPython 3.11 prints for the same
// values (repr, json.dumps, str.strip).

// TestPyFloatRepr checks float formatting against Python's repr(float).
func TestPyFloatRepr(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1e16, "1e+16"},
		{9999999999999998, "9999999999999998.0"},
		{1e15, "1000000000000000.0"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{-2.5e-5, "-2.5e-05"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
		{123456789012345.67, "123456789012345.67"},
		{0.30000000000000004, "0.30000000000000004"},
		{123456789, "123456789.0"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.NaN(), "nan"},
	} {
		if got := pyFloatRepr(tc.f); got != tc.want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// TestPyStr checks str() of values, including repr of nested strings.
func TestPyStr(t *testing.T) {
	list := func(items ...jinja.Value) jinja.Value { return jinja.NewList(items) }
	s := jinja.NewString
	for _, tc := range []struct {
		v    jinja.Value
		want string
	}{
		{jinja.Undefined(), ""},
		{jinja.None(), "None"},
		{jinja.NewBool(true), "True"},
		{jinja.NewInt(-7), "-7"},
		{jinja.NewFloat(2), "2.0"},
		{s("plain"), "plain"},
		{list(s("\x00\x1f\x7f\u0085\u00a0\u00ad\u2028\u200b\U000e0001 é 😀 \t\n\r\\ '")),
			`["\x00\x1f\x7f\x85\xa0\xad\u2028\u200b\U000e0001 é 😀 \t\n\r\\ '"]`},
		{list(s(`a"b`), s(`a'b"`), jinja.None(), jinja.NewFloat(1e16)), `['a"b', 'a\'b"', None, 1e+16]`},
	} {
		if got := pyStr(tc.v); got != tc.want {
			t.Errorf("pyStr(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestJSONDumps checks json.dumps options and escaping.
func TestJSONDumps(t *testing.T) {
	v, err := decodeJSON([]byte(`{"b": [1, {}], "a": {"x": []}}`))
	if err != nil {
		t.Fatal(err)
	}
	tab, zero := "\t", ""
	for _, tc := range []struct {
		name string
		v    jinja.Value
		opt  jsonOptions
		want string
	}{
		{"default", v, jsonOptions{itemSep: ", ", keySep: ": "}, `{"b": [1, {}], "a": {"x": []}}`},
		{"sorted", v, jsonOptions{itemSep: ", ", keySep: ": ", sortKeys: true}, `{"a": {"x": []}, "b": [1, {}]}`},
		{"tab indent", v, jsonOptions{itemSep: ",", keySep: ": ", indent: &tab},
			"{\n\t\"b\": [\n\t\t1,\n\t\t{}\n\t],\n\t\"a\": {\n\t\t\"x\": []\n\t}\n}"},
		{"zero indent", v, jsonOptions{itemSep: ",", keySep: ": ", indent: &zero},
			"{\n\"b\": [\n1,\n{}\n],\n\"a\": {\n\"x\": []\n}\n}"},
		{"escapes", jinja.NewString("\x00\x1f\x7f\u2028 é 😀 \b\f\t\"\\"), jsonOptions{},
			"\"\\u0000\\u001f\x7f\u2028 é 😀 \\b\\f\\t\\\"\\\\\""},
		{"ascii escapes", jinja.NewString("\x00\x1f\x7f\u2028 é 😀 \b\f\t\"\\"), jsonOptions{ensureASCII: true},
			`"\u0000\u001f\u007f\u2028 \u00e9 \ud83d\ude00 \b\f\t\"\\"`},
		{"non-finite", jinja.NewList([]jinja.Value{jinja.NewFloat(math.Inf(1)), jinja.NewFloat(math.Inf(-1)), jinja.NewFloat(math.NaN())}),
			jsonOptions{itemSep: ", "}, `[Infinity, -Infinity, NaN]`},
	} {
		got, err := jsonDumps(tc.v, tc.opt)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}

	if _, err := jsonDumps(jinja.Undefined(), jsonOptions{}); err == nil {
		t.Error("undefined encoded without error")
	}
	self := jinja.NewList(nil)
	self.AsList().Append(self)
	if _, err := jsonDumps(self, jsonOptions{}); err == nil || !strings.Contains(err.Error(), "Circular") {
		t.Errorf("self-holding list: err %v, want a circular reference error", err)
	}
	if got := pyStr(self); got != "[[...]]" {
		t.Errorf("str of self-holding list = %q, want [[...]]", got)
	}
}

// TestTrimWhitespace checks |trim against Python's str.strip().
func TestTrimWhitespace(t *testing.T) {
	in := " \x1c\x1d\x1e\x1f\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\u180e\u200b\ufeffx\t\n\v\f\r"
	got, err := filterTrim([]jinja.Value{jinja.NewString(in)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "\u180e\u200b\ufeffx"; got.AsString() != want {
		t.Errorf("trim = %q, want %q", got.AsString(), want)
	}
}

// TestNumberValue checks JSON number literals become Python's int or float.
func TestNumberValue(t *testing.T) {
	for lit, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "-0.0", "2.0": "2.0", "1e2": "100.0", "1E-7": "1e-07",
		"9223372036854775807": "9223372036854775807", "1e400": "inf", "-1e400": "-inf",
		"18446744073709551616": "1.8446744073709552e+19", // beyond int64: a float, unlike Python
	} {
		if got := pyStr(numberValue(lit)); got != want {
			t.Errorf("numberValue(%s) prints %q, want %q", lit, got, want)
		}
	}
}

// TestDecodeJSONOrder checks key order and repeated keys follow json.loads.
func TestDecodeJSONOrder(t *testing.T) {
	v, err := decodeJSON([]byte(`{"z": 1, "a": {"y": true, "b": null}, "z": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyStr(v), "{'z': 2, 'a': {'y': True, 'b': None}}"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a" 1}`, `[1] [2]`, `nul`, strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)} {
		if _, err := decodeJSON([]byte(bad)); err == nil {
			t.Errorf("decodeJSON(%.20q) accepted", bad)
		}
	}
}
