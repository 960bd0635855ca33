package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxDepth bounds the nesting of request JSON turned into template values, so
// a hostile request cannot exhaust the stack here or in the template engine.
// Python's json module stops at about the same depth (its recursion limit).
const maxDepth = 1000

// decodeJSON turns one JSON document into a template value the way
// json.loads hands it to transformers: objects keep their key order (a
// repeated key keeps its first position and takes the last value), numbers
// written without a fraction or exponent are ints and all others floats,
// true/false/null are bools and None.
func decodeJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the JSON value")
		}
		return jinja.Undefined(), err
	}
	return v, nil
}

// decodeValue reads the next value from dec; depth is its nesting level.
func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(t), nil
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return numberValue(string(t)), nil
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for dec.More() {
				item, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, item)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		case '{':
			obj := jinja.NewDict()
			d := obj.AsDict()
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, ok := keyTok.(string)
				if !ok {
					return jinja.Undefined(), fmt.Errorf("object key %v is not a string", keyTok)
				}
				val, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.Set(key, val)
			}
			if _, err := dec.Token(); err != nil { // '}'
				return jinja.Undefined(), err
			}
			return obj, nil
		}
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// numberValue converts a JSON number literal as Python's json module does:
// int when the literal has neither fraction nor exponent, float otherwise
// (overflowing to ±inf like float() does). Python ints are unbounded; an
// integer literal outside int64 becomes the nearest float, the one place the
// value (and so its rendering) can differ from transformers.
func numberValue(lit string) jinja.Value {
	if !strings.ContainsAny(lit, ".eE") {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return jinja.NewInt(n)
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !math.IsInf(f, 0) {
		// The decoder has already checked the literal's syntax.
		return jinja.NewString(lit)
	}
	return jinja.NewFloat(f)
}
