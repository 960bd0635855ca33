package openai

import (
	"bytes"
	"encoding/json"
)

// marshalNoEscape marshals v like json.Marshal but leaves <, > and & as they
// are, so text reads the same on the wire and in the template.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// orderedObject builds a JSON object whose keys come out in the order they
// were added, for wire forms whose shape depends on a type field.
type orderedObject []keyValue

// keyValue is one member of an orderedObject.
type keyValue struct {
	key string
	val any
}

// add appends a member.
func (o *orderedObject) add(key string, val any) { *o = append(*o, keyValue{key, val}) }

// MarshalJSON lets an orderedObject nest in another.
func (o orderedObject) MarshalJSON() ([]byte, error) { return o.marshal() }

// marshal writes the object.
func (o orderedObject) marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := marshalNoEscape(kv.key) // a string always marshals
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoEscape(kv.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Marshal encodes a wire value as the server sends it: like json.Marshal but
// without escaping <, > and & (json.Marshal would re-escape them even inside
// the output of a MarshalJSON method), so text reads as OpenAI sends it.
func Marshal(v any) ([]byte, error) { return marshalNoEscape(v) }
