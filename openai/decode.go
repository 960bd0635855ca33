package openai

import (
	"fmt"
	"math"
	"strconv"
)

// join extends a JSON path by an object key.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// at extends a JSON path by an array index.
func at(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// parseRoot parses a request body and checks that its top level is an object.
func parseRoot(body []byte) (*node, *Error) {
	root, err := parseJSON(body)
	if err != nil {
		return nil, err
	}
	if root.kind != kObject {
		return nil, InvalidJSON(fmt.Sprintf("The request body must be a JSON object, got %s.", root.kind))
	}
	return root, nil
}

// unknownParam is the error for a field no OpenAI-compatible request has.
func unknownParam(path string) *Error {
	return Unsupported(path, fmt.Sprintf("Unknown parameter '%s'.", path))
}

// typeError is the error for a value of the wrong JSON type.
func typeError(path, want string, n *node) *Error {
	return InvalidRequest(path, fmt.Sprintf("'%s' must be %s, got %s.", path, want, n.kind))
}

// fields calls fn for each member of the object n, in document order; n must
// be an object.
func fields(n *node, path string, fn func(key string, v *node, path string) *Error) *Error {
	if n.kind != kObject {
		return typeError(path, "an object", n)
	}
	for _, m := range n.members {
		if err := fn(m.key, m.val, join(path, m.key)); err != nil {
			return err
		}
	}
	return nil
}

// elems calls fn for each element of the array n; n must be an array.
func elems(n *node, path string, fn func(i int, v *node, path string) *Error) *Error {
	if n.kind != kArray {
		return typeError(path, "an array", n)
	}
	for i, v := range n.items() {
		if err := fn(i, v, at(path, i)); err != nil {
			return err
		}
	}
	return nil
}

// str reads a string; null reads as "".
func str(n *node, path string) (string, *Error) {
	switch n.kind {
	case kNull:
		return "", nil
	case kString:
		return n.str, nil
	}
	return "", typeError(path, "a string", n)
}

// optStr reads a string where absent and "" differ; null reads as nil.
func optStr(n *node, path string) (*string, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	s, err := str(n, path)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// boolean reads a boolean; null reads as false.
func boolean(n *node, path string) (bool, *Error) {
	switch n.kind {
	case kNull:
		return false, nil
	case kBool:
		return n.boolean, nil
	}
	return false, typeError(path, "a boolean", n)
}

// optBool reads a boolean where absent and false differ; null reads as nil.
func optBool(n *node, path string) (*bool, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	b, err := boolean(n, path)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// optFloat reads a number; null reads as nil.
func optFloat(n *node, path string) (*float64, *Error) {
	switch n.kind {
	case kNull:
		return nil, nil
	case kNumber:
		f := n.num
		return &f, nil
	}
	return nil, typeError(path, "a number", n)
}

// integer reads an integral number: an integer literal, or a number with no
// fraction (10.0, 1e3) inside int64.
func integer(n *node, path string) (int64, *Error) {
	if n.kind != kNumber {
		return 0, typeError(path, "an integer", n)
	}
	f := n.num
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f), nil // exact: no literal to parse again
	}
	if i, err := strconv.ParseInt(string(n.raw), 10, 64); err == nil {
		return i, nil
	}
	if f != math.Trunc(f) {
		return 0, InvalidRequest(path, fmt.Sprintf("'%s' must be an integer, got %s.", path, n.raw))
	}
	if f < -(1<<63) || f >= 1<<63 {
		return 0, InvalidRequest(path, fmt.Sprintf("'%s' is out of range: %s.", path, n.raw))
	}
	return int64(f), nil
}

// optInt reads an integer that fits an int; null reads as nil.
func optInt(n *node, path string) (*int, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	i, err := integer(n, path)
	if err != nil {
		return nil, err
	}
	if i < math.MinInt32 || i > math.MaxInt32 {
		return nil, InvalidRequest(path, fmt.Sprintf("'%s' is out of range: %s.", path, n.raw))
	}
	v := int(i)
	return &v, nil
}

// optInt64 reads any int64; null reads as nil.
func optInt64(n *node, path string) (*int64, *Error) {
	if n.kind == kNull {
		return nil, nil
	}
	i, err := integer(n, path)
	if err != nil {
		return nil, err
	}
	return &i, nil
}

// object reads an object kept as compact raw JSON (key order kept); null
// reads as nil.
func object(n *node, path string) ([]byte, *Error) {
	switch n.kind {
	case kNull:
		return nil, nil
	case kObject:
		return n.compact(), nil
	}
	return nil, typeError(path, "an object", n)
}

// typeOf reads the "type" member of an object first, whatever its position,
// so that the rest of the object can be read by its type.
func typeOf(n *node, path string) (string, *Error) {
	if n.kind != kObject {
		return "", typeError(path, "an object", n)
	}
	t := n.get("type")
	if t == nil {
		return "", nil
	}
	return str(t, join(path, "type"))
}

// unsupportedCheck decides whether a known OpenAI field this server does not
// implement asks for anything; it returns the error when it does.
type unsupportedCheck func(n *node, path string) *Error

// nullOnly accepts only null: anything else asks for what is missing.
func nullOnly(what string) unsupportedCheck {
	return func(n *node, path string) *Error {
		if n.kind == kNull {
			return nil
		}
		return Unsupported(path, fmt.Sprintf("'%s' is not supported: %s.", path, what))
	}
}

// emptyOnly accepts null or an empty object, array or string.
func emptyOnly(what string) unsupportedCheck {
	return func(n *node, path string) *Error {
		switch {
		case n.kind == kNull,
			n.kind == kObject && len(n.members) == 0,
			n.kind == kArray && n.length() == 0,
			n.kind == kString && n.str == "":
			return nil
		}
		return Unsupported(path, fmt.Sprintf("'%s' is not supported: %s.", path, what))
	}
}

// falseOnly accepts null or false.
func falseOnly(what string) unsupportedCheck {
	return func(n *node, path string) *Error {
		if n.kind == kNull || n.kind == kBool && !n.boolean {
			return nil
		}
		return Unsupported(path, fmt.Sprintf("'%s' is not supported: %s.", path, what))
	}
}

// oneOfStrings accepts null or one of the given strings.
func oneOfStrings(what string, ok ...string) unsupportedCheck {
	return func(n *node, path string) *Error {
		if n.kind == kNull {
			return nil
		}
		if n.kind == kString {
			for _, s := range ok {
				if n.str == s {
					return nil
				}
			}
		}
		return Unsupported(path, fmt.Sprintf("'%s' is not supported: %s.", path, what))
	}
}

// textModalities accepts null or an array holding only "text".
func textModalities(n *node, path string) *Error {
	if n.kind == kNull {
		return nil
	}
	if n.kind == kArray {
		ok := true
		for _, e := range n.items() {
			if e.kind != kString || e.str != "text" {
				ok = false
			}
		}
		if ok {
			return nil
		}
	}
	return Unsupported(path, fmt.Sprintf("'%s' is not supported: only text output is produced.", path))
}

// serviceTier accepts the tiers that ask for nothing special.
var serviceTier = oneOfStrings("this server has a single service tier", "auto", "default")

// checkMetadata checks OpenAI's metadata shape: at most 16 string values, keys
// up to 64 and values up to 512 characters.
func checkMetadata(raw []byte, path string) *Error {
	if raw == nil {
		return nil
	}
	n, err := parseJSON(raw)
	if err != nil {
		return InvalidRequest(path, fmt.Sprintf("'%s' is not valid JSON.", path))
	}
	if n.kind != kObject {
		return typeError(path, "an object", n)
	}
	if len(n.members) > 16 {
		return InvalidRequest(path, fmt.Sprintf("'%s' has %d keys; at most 16 are allowed.", path, len(n.members)))
	}
	for _, m := range n.members {
		p := join(path, m.key)
		if len([]rune(m.key)) > 64 {
			return InvalidRequest(p, fmt.Sprintf("Metadata key '%s' is longer than 64 characters.", m.key))
		}
		if m.val.kind != kString {
			return typeError(p, "a string", m.val)
		}
		if len([]rune(m.val.str)) > 512 {
			return InvalidRequest(p, fmt.Sprintf("'%s' is longer than 512 characters.", p))
		}
	}
	return nil
}
