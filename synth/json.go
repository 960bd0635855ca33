package synth

import (
	"bytes"
	"encoding/json"
)

// member is one key of an object whose key order matters.
type member struct {
	key string
	val any
}

// object is a JSON object written in the order its members are listed, so
// files whose layout the Hugging Face tools fix (tokenizer.json) come out the
// same way, byte for byte, on every run.
type object []member

// MarshalJSON writes the members in order, without HTML escaping, so that
// tokens such as <|im_end|> stay readable.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := compactJSON(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := compactJSON(m.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// compactJSON marshals v on one line without HTML escaping.
func compactJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// prettyJSON marshals v indented by two spaces, the way Python's
// json.dumps(indent=2) and serde_json's pretty printer lay files out, with a
// final newline and no HTML escaping. Map keys come out sorted, as
// transformers writes config.json.
func prettyJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
