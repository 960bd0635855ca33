package chat

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// This file holds the pieces of Python semantics the template engine gets
// slightly wrong for transformers' purposes: str() of a value (what {{ }}
// prints and what |string and |trim see), float repr, str.strip()'s notion of
// whitespace, and json.dumps (transformers' tojson). The template is
// rewritten (rewrite.go) to call these instead of the engine's built-ins.

// pyStr is Python's str(v) as Jinja2 prints it: None is "None", floats use
// repr, containers use repr of their items, and an undefined value is "".
func pyStr(v jinja.Value) string {
	switch {
	case v.IsUndefined():
		return ""
	case v.IsString():
		return v.AsString()
	}
	var b strings.Builder
	writeRepr(&b, v, map[any]bool{})
	return b.String()
}

// writeRepr appends Python's repr(v) to b; active holds the containers being
// written, so a container that holds itself prints "[...]" as Python's does.
func writeRepr(b *strings.Builder, v jinja.Value, active map[any]bool) {
	switch {
	case v.IsUndefined():
		b.WriteString("Undefined")
	case v.IsNone():
		b.WriteString("None")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloatRepr(v.AsFloat()))
	case v.IsString():
		writeStringRepr(b, v.AsString())
	case v.IsList():
		l := v.AsList()
		if active[l] {
			b.WriteString("[...]")
			return
		}
		active[l] = true
		b.WriteByte('[')
		for i, item := range l.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, item, active)
		}
		b.WriteByte(']')
		delete(active, l)
	case v.IsDict():
		d := v.AsDict()
		if active[d] {
			b.WriteString("{...}")
			return
		}
		active[d] = true
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStringRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, d.Data[k], active)
		}
		b.WriteByte('}')
		delete(active, d)
	default: // a callable: Python prints an object address, which nothing can match
		b.WriteString(v.String())
	}
}

// writeStringRepr appends Python's repr(s): single quotes unless s holds a
// single quote and no double quote, backslash escapes for the quote, \\, \t,
// \n, \r and every non-printable character.
func writeStringRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f || strconv.IsPrint(r):
			// strconv.IsPrint is Python's str.isprintable: no C* or Z*
			// category except the ASCII space.
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(quote)
}

// pyFloatRepr is Python's repr(float): the shortest digits that round-trip,
// positional when the decimal exponent is in [-4, 16) (always with a
// fractional part, "2.0"), scientific otherwise ("1e+16", "1.5e-05").
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	exp, _ := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// isPySpace reports whether Python's str.isspace() holds for r: Go's
// unicode.IsSpace set plus the four ASCII separators U+001C–U+001F.
func isPySpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0,
		0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// jsonOptions are the json.dumps arguments transformers' tojson passes on.
type jsonOptions struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// jsonDumps is Python's json.dumps(v, ...) for template values: insertion
// key order unless sortKeys, ", " and ": " separators ("," when indented),
// no HTML escaping, floats as repr, NaN and ±Infinity as Python writes them.
func jsonDumps(v jinja.Value, opt jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, opt, 0, map[any]bool{}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writeJSON appends the JSON of v at indentation level level; active holds
// the containers being written, to refuse a container that holds itself
// ("Circular reference detected", as Python does) instead of recursing
// forever.
func writeJSON(b *strings.Builder, v jinja.Value, opt jsonOptions, level int, active map[any]bool) error {
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		switch {
		case math.IsNaN(f):
			b.WriteString("NaN")
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloatRepr(f))
		}
	case v.IsString():
		writeJSONString(b, v.AsString(), opt.ensureASCII)
	case v.IsList():
		l := v.AsList()
		if len(l.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		if active[l] {
			return fmt.Errorf("Circular reference detected")
		}
		active[l] = true
		b.WriteByte('[')
		for i, item := range l.Items {
			writeJSONSep(b, opt, level+1, i > 0)
			if err := writeJSON(b, item, opt, level+1, active); err != nil {
				return err
			}
		}
		writeJSONClose(b, opt, level)
		b.WriteByte(']')
		delete(active, l)
	case v.IsDict():
		d := v.AsDict()
		if len(d.Keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if active[d] {
			return fmt.Errorf("Circular reference detected")
		}
		active[d] = true
		keys := d.Keys
		if opt.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys) // byte order of UTF-8 is code point order, as Python sorts
		}
		b.WriteByte('{')
		for i, k := range keys {
			writeJSONSep(b, opt, level+1, i > 0)
			writeJSONString(b, k, opt.ensureASCII)
			b.WriteString(opt.keySep)
			if err := writeJSON(b, d.Data[k], opt, level+1, active); err != nil {
				return err
			}
		}
		writeJSONClose(b, opt, level)
		b.WriteByte('}')
		delete(active, d)
	case v.IsUndefined():
		return fmt.Errorf("Object of type Undefined is not JSON serializable")
	default:
		return fmt.Errorf("Object of type function is not JSON serializable")
	}
	return nil
}

// writeJSONSep writes what precedes a container item: the item separator
// (after the first item) and, when indenting, a newline and the indentation.
func writeJSONSep(b *strings.Builder, opt jsonOptions, level int, notFirst bool) {
	if notFirst {
		b.WriteString(opt.itemSep)
	}
	if opt.indent != nil {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(*opt.indent, level))
	}
}

// writeJSONClose writes the newline and indentation before a closing
// bracket when indenting.
func writeJSONClose(b *strings.Builder, opt jsonOptions, level int) {
	if opt.indent != nil {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(*opt.indent, level))
	}
}

// writeJSONString appends s as a JSON string the way Python's encoder does:
// \" \\ \b \f \n \r \t, other control characters as \u00XX, everything else
// as is, or, with ensureASCII, every non-ASCII character (and DEL) as \uXXXX
// escapes (surrogate pairs above the BMP). Lower-case hex, like Python.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case !ensureASCII || r < 0x7f:
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			}
		}
	}
	b.WriteByte('"')
}

// filterToJSON is transformers' tojson filter:
// tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
// returning json.dumps(x, ...) with those arguments.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson() missing 1 required positional argument: 'x'")
	}
	params := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args) > 1+len(params) {
		return jinja.Undefined(), fmt.Errorf("tojson() takes from 1 to %d positional arguments but %d were given", 1+len(params), len(args))
	}
	get := map[string]jinja.Value{}
	for i, a := range args[1:] {
		get[params[i]] = a
	}
	for k, v := range kwargs {
		if !slices.Contains(params, k) {
			return jinja.Undefined(), fmt.Errorf("tojson() got an unexpected keyword argument '%s'", k)
		}
		get[k] = v
	}
	opt := jsonOptions{itemSep: ", ", keySep: ": "}
	if v, ok := get["ensure_ascii"]; ok {
		opt.ensureASCII = v.IsTruthy()
	}
	if v, ok := get["sort_keys"]; ok {
		opt.sortKeys = v.IsTruthy()
	}
	if v, ok := get["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		var ind string
		switch {
		case v.IsString():
			ind = v.AsString()
		case v.IsInt():
			ind = strings.Repeat(" ", int(max(0, min(v.AsInt(), 1<<10))))
		case v.IsBool():
			if v.AsBool() {
				ind = " "
			}
		default:
			return jinja.Undefined(), fmt.Errorf("tojson: indent must be an int or a string")
		}
		opt.indent = &ind
		opt.itemSep = ","
	}
	if v, ok := get["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must be two strings")
		}
		opt.itemSep = v.AsList().Items[0].AsString()
		opt.keySep = v.AsList().Items[1].AsString()
	}
	s, err := jsonDumps(args[0], opt)
	if err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(s), nil
}

// filterString is Jinja2's string filter: str(x).
func filterString(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	return jinja.NewString(pyStr(args[0])), nil
}

// filterTrim is Jinja2's trim filter: str(x).strip(chars), where no chars
// means Python's whitespace (str.isspace), not Go's.
func filterTrim(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	s := pyStr(args[0])
	chars := jinja.None()
	if len(args) > 1 {
		chars = args[1]
	}
	if c, ok := kwargs["chars"]; ok {
		chars = c
	}
	switch {
	case chars.IsNone() || chars.IsUndefined():
		return jinja.NewString(strings.TrimFunc(s, isPySpace)), nil
	case chars.IsString():
		return jinja.NewString(strings.Trim(s, chars.AsString())), nil
	}
	return jinja.Undefined(), fmt.Errorf("strip arg must be None or str")
}

// filterPrint renders the value of a {{ }} expression as Jinja2 does: str(x).
func filterPrint(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	return jinja.NewString(pyStr(args[0])), nil
}
