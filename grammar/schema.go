package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Error is a schema the grammar cannot enforce or cannot read. Keyword is
// set when a keyword is valid JSON Schema but cannot be enforced.
type Error struct {
	Path    string // JSON pointer of the schema part, "" for the root
	Keyword string
	Message string
}

func (e *Error) Error() string {
	where := e.Path
	if where == "" {
		where = "the schema"
	}
	return where + ": " + e.Message
}

// Unsupported reports whether the error names a keyword that cannot be
// enforced (rather than a malformed schema).
func (e *Error) Unsupported() bool { return e.Keyword != "" }

// annotations are keywords that constrain nothing: ignoring them is exact.
var annotations = map[string]bool{
	"title": true, "description": true, "examples": true, "default": true, "$comment": true,
	"$schema": true, "$id": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "contentMediaType": true, "contentEncoding": true,
}

// enforced are the keywords the grammar enforces.
var enforced = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true,
	"items": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

// Dates: each month's days, February's 29th left out (a grammar cannot
// know leap years), so every date produced exists.
const (
	datePattern = `[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)`
	timePattern = `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`
)

// formats are the string formats enforced (RFC 3339 full-date,
// full-time, date-time; RFC 4122 uuid). Each produces only valid strings;
// leap seconds and February 29th are never produced.
var formats = map[string]string{
	"date":      `^` + datePattern + `$`,
	"time":      `^` + timePattern + `$`,
	"date-time": `^` + datePattern + `T` + timePattern + `$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
}

// Limits of what is compiled.
const (
	maxProps     = 63 // per object: the seen set is a bitmask
	maxNesting   = 24 // schema levels
	anyDepth     = 6  // nesting of an unconstrained value (json_object)
	maxNodes     = 20000
	maxEnumTexts = 1000
)

// JSONSchema compiles schema (a JSON Schema document) for vocabulary v.
// Every keyword is either enforced, an annotation, or refused with an
// *Error naming it.
func JSONSchema(schema []byte, v *Vocab) (*Grammar, error) {
	c, err := newCompiler(schema)
	if err != nil {
		return nil, err
	}
	root, err := c.value(c.doc, "", 0)
	if err != nil {
		return nil, err
	}
	return newGrammar(root, v), nil
}

// JSONObject is any JSON object (response_format json_object), nested at
// most a few levels.
func JSONObject(v *Vocab) *Grammar {
	c := &compiler{refs: map[string]*node{}, active: map[string]bool{}}
	return newGrammar(c.anyObject(0), v)
}

type compiler struct {
	doc    json.RawMessage
	defs   map[string]json.RawMessage // "#/$defs/x" → schema
	refs   map[string]*node
	active map[string]bool
	anys   []*node
	nodes  int
}

func newCompiler(schema []byte) (*compiler, error) {
	c := &compiler{refs: map[string]*node{}, active: map[string]bool{}, defs: map[string]json.RawMessage{}}
	if !json.Valid(schema) {
		return nil, &Error{Message: "not valid JSON"}
	}
	c.doc = json.RawMessage(bytes.TrimSpace(schema))
	var top map[string]json.RawMessage
	if json.Unmarshal(c.doc, &top) == nil {
		for _, k := range []string{"$defs", "definitions"} {
			raw, ok := top[k]
			if !ok {
				continue
			}
			var defs map[string]json.RawMessage
			if err := json.Unmarshal(raw, &defs); err != nil {
				return nil, &Error{Path: "/" + k, Message: "must be an object of schemas"}
			}
			for name, d := range defs {
				c.defs["#/"+k+"/"+escapePointer(name)] = d
			}
		}
	}
	return c, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (c *compiler) add(n *node) *node {
	c.nodes++
	return n
}

func unsupported(path, kw, msg string) *Error {
	return &Error{Path: path, Keyword: kw, Message: msg}
}

func invalid(path, msg string) *Error { return &Error{Path: path, Message: msg} }

// value compiles one schema.
func (c *compiler) value(raw json.RawMessage, path string, depth int) (*node, error) {
	if depth > maxNesting {
		return nil, unsupported(path, "properties", fmt.Sprintf("the schema nests deeper than %d levels", maxNesting))
	}
	if c.nodes > maxNodes {
		return nil, unsupported(path, "$ref", "the schema is too large to compile")
	}
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true", "{}":
		return c.anyValue(0), nil
	case "false":
		return nil, invalid(path, "the schema false allows no value")
	}
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, invalid(path, "a schema must be an object or a boolean")
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var constraints []string
	for _, k := range keys {
		switch {
		case annotations[k]:
		case enforced[k]:
			constraints = append(constraints, k)
		default:
			return nil, unsupported(path+"/"+escapePointer(k), k, fmt.Sprintf("the keyword %q cannot be enforced", k))
		}
	}
	alone := func(kw string) error {
		for _, k := range constraints {
			if k != kw {
				return unsupported(path+"/"+k, k, fmt.Sprintf("%q beside %q cannot be enforced", k, kw))
			}
		}
		return nil
	}
	if ref, ok := s["$ref"]; ok {
		if err := alone("$ref"); err != nil {
			return nil, err
		}
		return c.ref(ref, path+"/$ref", depth)
	}
	if all, ok := s["allOf"]; ok {
		var list []json.RawMessage
		if json.Unmarshal(all, &list) != nil || len(list) == 0 {
			return nil, invalid(path+"/allOf", "must be a non-empty array of schemas")
		}
		if len(list) > 1 {
			return nil, unsupported(path+"/allOf", "allOf", "allOf with more than one schema cannot be enforced")
		}
		if err := alone("allOf"); err != nil {
			return nil, err
		}
		return c.value(list[0], path+"/allOf/0", depth+1)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		raw, ok := s[kw]
		if !ok {
			continue
		}
		if err := alone(kw); err != nil {
			return nil, err
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return nil, invalid(path+"/"+kw, "must be a non-empty array of schemas")
		}
		alts := &node{kind: kAny}
		var kinds []string
		for i, l := range list {
			n, err := c.value(l, fmt.Sprintf("%s/%s/%d", path, kw, i), depth+1)
			if err != nil {
				return nil, err
			}
			alts.alts = appendAlts(alts.alts, n)
			kinds = append(kinds, valueKinds(n)...)
		}
		if kw == "oneOf" {
			// Exclusive by construction only when no two alternatives
			// share a JSON type.
			seen := map[string]bool{}
			for _, k := range kinds {
				if seen[k] {
					return nil, unsupported(path+"/oneOf", "oneOf", "oneOf alternatives of the same type cannot be enforced as exclusive; use anyOf")
				}
				seen[k] = true
			}
		}
		return c.add(alts), nil
	}
	types, err := schemaTypes(s, path)
	if err != nil {
		return nil, err
	}
	if _, ok := s["const"]; ok {
		return c.enum(s, "const", types, constraints, path)
	}
	if _, ok := s["enum"]; ok {
		return c.enum(s, "enum", types, constraints, path)
	}
	out := &node{kind: kAny}
	for _, t := range types {
		var n *node
		var err error
		switch t {
		case "object":
			n, err = c.object(s, path, depth)
		case "array":
			n, err = c.array(s, path, depth)
		case "string":
			n, err = c.str(s, path)
		case "number", "integer":
			if t == "integer" && slices.Contains(types, "number") {
				continue // every integer is a number
			}
			n, err = c.number(s, t == "integer", path)
		case "boolean":
			out.alts = append(out.alts, literal("true"), literal("false"))
			continue
		case "null":
			n = literal("null")
		}
		if err != nil {
			return nil, err
		}
		out.alts = appendAlts(out.alts, n)
	}
	if len(out.alts) == 1 {
		return out.alts[0], nil
	}
	return c.add(out), nil
}

// appendAlts adds n's alternatives (n itself unless it is a choice).
func appendAlts(alts []*node, n *node) []*node {
	if n.kind == kAny {
		return append(alts, n.alts...)
	}
	return append(alts, n)
}

// valueKinds names the JSON types a node can start, for oneOf's check.
func valueKinds(n *node) []string {
	switch n.kind {
	case kAny:
		var out []string
		for _, a := range n.alts {
			out = append(out, valueKinds(a)...)
		}
		return out
	case kObject:
		return []string{"object"}
	case kArray:
		return []string{"array"}
	case kString:
		return []string{"string"}
	case kNumber:
		return []string{"number"}
	case kLiteral:
		switch n.lit[0] {
		case 't', 'f':
			return []string{"boolean"}
		case 'n':
			return []string{"null"}
		case '"':
			return []string{"string"}
		case '{':
			return []string{"object"}
		case '[':
			return []string{"array"}
		}
		return []string{"number"}
	}
	return []string{"other"}
}

var allTypes = []string{"object", "array", "string", "number", "boolean", "null"}

func schemaTypes(s map[string]json.RawMessage, path string) ([]string, error) {
	raw, ok := s["type"]
	if !ok {
		return allTypes, nil
	}
	var one string
	var list []string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil, invalid(path+"/type", "must be a type name or a non-empty array of them")
	}
	for _, t := range list {
		if !slices.Contains(allTypes, t) && t != "integer" {
			return nil, invalid(path+"/type", fmt.Sprintf("unknown type %q", t))
		}
	}
	return list, nil
}

func literal(s string) *node { return &node{kind: kLiteral, lit: []byte(s)} }

func (c *compiler) ref(raw json.RawMessage, path string, depth int) (*node, error) {
	var ref string
	if json.Unmarshal(raw, &ref) != nil {
		return nil, invalid(path, "must be a string")
	}
	if ref == "#" {
		return nil, unsupported(path, "$ref", "a recursive $ref cannot be enforced")
	}
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	def, ok := c.defs[ref]
	if !ok {
		return nil, unsupported(path, "$ref", fmt.Sprintf("$ref %q: only references to the root's $defs (or definitions) are supported", ref))
	}
	if c.active[ref] {
		return nil, unsupported(path, "$ref", fmt.Sprintf("$ref %q is recursive, which cannot be enforced", ref))
	}
	c.active[ref] = true
	n, err := c.value(def, strings.TrimPrefix(ref, "#"), depth+1)
	delete(c.active, ref)
	if err != nil {
		return nil, err
	}
	c.refs[ref] = n
	return n, nil
}

// enum compiles enum or const: the listed values as written (compacted),
// those of an allowed type. Strings are matched by their characters, so
// any escaping of them is accepted.
func (c *compiler) enum(s map[string]json.RawMessage, kw string, types, constraints []string, path string) (*node, error) {
	for _, k := range constraints {
		if k != kw && k != "type" {
			return nil, unsupported(path+"/"+k, k, fmt.Sprintf("%q beside %q cannot be enforced", k, kw))
		}
	}
	var values []json.RawMessage
	if kw == "const" {
		values = []json.RawMessage{s["const"]}
	} else if json.Unmarshal(s["enum"], &values) != nil || len(values) == 0 {
		return nil, invalid(path+"/enum", "must be a non-empty array")
	}
	if len(values) > maxEnumTexts {
		return nil, unsupported(path+"/"+kw, kw, fmt.Sprintf("more than %d values", maxEnumTexts))
	}
	out := &node{kind: kAny}
	var strs []string
	for _, v := range values {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			return nil, invalid(path+"/"+kw, "invalid value")
		}
		t := jsonType(b.Bytes())
		if !slices.Contains(types, t) && !(t == "integer" && slices.Contains(types, "number")) &&
			!(t == "number" && slices.Contains(types, "integer") && isIntegral(b.Bytes())) {
			continue
		}
		if t == "string" {
			var str string
			json.Unmarshal(b.Bytes(), &str)
			strs = append(strs, str)
			continue
		}
		out.alts = append(out.alts, &node{kind: kLiteral, lit: slices.Clone(b.Bytes())})
	}
	if len(strs) > 0 {
		out.alts = append(out.alts, &node{kind: kString, chars: trieDFA(strs, false), maxLen: -1})
	}
	if len(out.alts) == 0 {
		return nil, invalid(path+"/"+kw, "no value has an allowed type")
	}
	if len(out.alts) == 1 {
		return out.alts[0], nil
	}
	return c.add(out), nil
}

func jsonType(v []byte) string {
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if isIntegral(v) {
		return "integer"
	}
	return "number"
}

func isIntegral(v []byte) bool { return !bytes.ContainsAny(v, ".eE") }

func (c *compiler) object(s map[string]json.RawMessage, path string, depth int) (*node, error) {
	for _, k := range []string{"patternProperties", "propertyNames", "minProperties", "maxProperties"} {
		if _, ok := s[k]; ok {
			return nil, unsupported(path+"/"+k, k, fmt.Sprintf("the keyword %q cannot be enforced", k))
		}
	}
	var props map[string]json.RawMessage
	if raw, ok := s["properties"]; ok {
		if json.Unmarshal(raw, &props) != nil {
			return nil, invalid(path+"/properties", "must be an object of schemas")
		}
	}
	var required []string
	if raw, ok := s["required"]; ok {
		if json.Unmarshal(raw, &required) != nil {
			return nil, invalid(path+"/required", "must be an array of strings")
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, r := range required {
		if _, ok := props[r]; !ok && !slices.Contains(names, r) {
			names = append(names, r) // required without a schema: any value
		}
	}
	if len(names) > maxProps {
		return nil, unsupported(path+"/properties", "properties", fmt.Sprintf("more than %d properties", maxProps))
	}
	n := &node{kind: kObject}
	for i, name := range names {
		raw, ok := props[name]
		var v *node
		if !ok {
			v = c.anyValue(0)
		} else {
			var err error
			if v, err = c.value(raw, path+"/properties/"+escapePointer(name), depth+1); err != nil {
				return nil, err
			}
		}
		n.props = append(n.props, v)
		if slices.Contains(required, name) {
			n.required |= 1 << uint(i)
		}
	}
	// Other keys: a schema given for them, any value when the object has no
	// properties, none otherwise (the declared ones are always valid).
	if raw, ok := s["additionalProperties"]; ok {
		switch string(bytes.TrimSpace(raw)) {
		case "false":
		case "true", "{}":
			if len(names) == 0 {
				n.extra = c.anyValue(depth + 1)
			}
		default:
			v, err := c.value(raw, path+"/additionalProperties", depth+1)
			if err != nil {
				return nil, err
			}
			n.extra = v
		}
	} else if len(names) == 0 {
		n.extra = c.anyValue(0)
	}
	n.key = &node{kind: kString, chars: trieDFA(names, n.extra != nil), maxLen: -1}
	return c.add(n), nil
}

func (c *compiler) count(s map[string]json.RawMessage, kw, path string) (int32, bool, error) {
	raw, ok := s[kw]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, false, invalid(path+"/"+kw, "must be a non-negative integer")
	}
	return int32(f), true, nil
}

func (c *compiler) array(s map[string]json.RawMessage, path string, depth int) (*node, error) {
	for _, k := range []string{"prefixItems", "contains", "minContains", "maxContains", "unevaluatedItems", "additionalItems"} {
		if _, ok := s[k]; ok {
			return nil, unsupported(path+"/"+k, k, fmt.Sprintf("the keyword %q cannot be enforced", k))
		}
	}
	if raw, ok := s["uniqueItems"]; ok && string(bytes.TrimSpace(raw)) != "false" {
		return nil, unsupported(path+"/uniqueItems", "uniqueItems", "uniqueItems cannot be enforced")
	}
	n := &node{kind: kArray, maxItems: -1}
	if raw, ok := s["items"]; ok {
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			return nil, unsupported(path+"/items", "items", "items as an array (tuples) cannot be enforced")
		}
		v, err := c.value(raw, path+"/items", depth+1)
		if err != nil {
			return nil, err
		}
		n.items = v
	} else {
		n.items = c.anyValue(0)
	}
	var err error
	if n.minItems, _, err = c.count(s, "minItems", path); err != nil {
		return nil, err
	}
	mx, ok, err := c.count(s, "maxItems", path)
	if err != nil {
		return nil, err
	}
	if ok {
		if mx < n.minItems {
			return nil, invalid(path+"/maxItems", "below minItems")
		}
		n.maxItems = mx
	}
	return c.add(n), nil
}

func (c *compiler) str(s map[string]json.RawMessage, path string) (*node, error) {
	n := &node{kind: kString, maxLen: -1}
	var err error
	if n.minLen, _, err = c.count(s, "minLength", path); err != nil {
		return nil, err
	}
	mx, ok, err := c.count(s, "maxLength", path)
	if err != nil {
		return nil, err
	}
	if ok {
		if mx < n.minLen {
			return nil, invalid(path+"/maxLength", "below minLength")
		}
		n.maxLen = mx
	}
	n.counted = n.minLen > 0 || n.maxLen >= 0
	pattern := ""
	if raw, ok := s["pattern"]; ok {
		if json.Unmarshal(raw, &pattern) != nil {
			return nil, invalid(path+"/pattern", "must be a string")
		}
	}
	if raw, ok := s["format"]; ok {
		var f string
		if json.Unmarshal(raw, &f) != nil {
			return nil, invalid(path+"/format", "must be a string")
		}
		re, known := formats[f]
		if !known {
			return nil, unsupported(path+"/format", "format", fmt.Sprintf("format %q cannot be enforced (date, time, date-time and uuid can)", f))
		}
		if pattern != "" {
			return nil, unsupported(path+"/format", "format", "format beside pattern cannot be enforced")
		}
		pattern = re
	}
	if pattern != "" {
		d, err := patternDFA(pattern)
		if err != nil {
			return nil, unsupported(path+"/pattern", "pattern", err.Error())
		}
		n.chars = d
		if n.maxLen >= 0 && d.dist[0] > n.maxLen {
			return nil, invalid(path+"/maxLength", "no string that short matches the pattern")
		}
	}
	return c.add(n), nil
}

func (c *compiler) number(s map[string]json.RawMessage, integer bool, path string) (*node, error) {
	if _, ok := s["multipleOf"]; ok {
		return nil, unsupported(path+"/multipleOf", "multipleOf", "multipleOf cannot be enforced")
	}
	bound := func(kw string) (float64, bool, error) {
		raw, ok := s[kw]
		if !ok {
			return 0, false, nil
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			var b bool
			if json.Unmarshal(raw, &b) == nil {
				return 0, false, unsupported(path+"/"+kw, kw, "a boolean "+kw+" (draft 4) is not supported; give the bound itself")
			}
			return 0, false, invalid(path+"/"+kw, "must be a number")
		}
		return f, true, nil
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	var loX, hiX bool
	if f, ok, err := bound("minimum"); err != nil {
		return nil, err
	} else if ok {
		lo = f
	}
	if f, ok, err := bound("exclusiveMinimum"); err != nil {
		return nil, err
	} else if ok && f >= lo {
		lo, loX = f, true
	}
	if f, ok, err := bound("maximum"); err != nil {
		return nil, err
	} else if ok {
		hi = f
	}
	if f, ok, err := bound("exclusiveMaximum"); err != nil {
		return nil, err
	} else if ok && f <= hi {
		hi, hiX = f, true
	}
	// Bounds beyond 18 digits are no bounds the grammar can track.
	const far = 1e18
	if lo < -far {
		lo = math.Inf(-1)
	}
	if hi > far {
		hi = math.Inf(1)
	}
	r := newNumRange(integer, lo, loX, hi, hiX)
	if r.empty() {
		return nil, invalid(path, "no number satisfies the bounds the grammar can produce")
	}
	return c.add(&node{kind: kNumber, num: r}), nil
}

// anyValue is an unconstrained JSON value nested at depth d.
func (c *compiler) anyValue(d int) *node {
	for len(c.anys) <= d {
		c.anys = append(c.anys, nil)
	}
	if c.anys[d] != nil {
		return c.anys[d]
	}
	n := &node{kind: kAny}
	c.anys[d] = n
	str := &node{kind: kString, maxLen: -1}
	num := &node{kind: kNumber, num: newNumRange(false, math.Inf(-1), false, math.Inf(1), false)}
	if d < anyDepth {
		n.alts = append(n.alts, c.anyObject(d), &node{kind: kArray, items: c.anyValue(d + 1), maxItems: -1})
	}
	n.alts = append(n.alts, str, num, literal("true"), literal("false"), literal("null"))
	return n
}

// anyObject is an object of unconstrained values at depth d.
func (c *compiler) anyObject(d int) *node {
	return &node{kind: kObject, extra: c.anyValue(d + 1), key: &node{kind: kString, maxLen: -1}}
}
