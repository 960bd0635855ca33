package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aimaproject/aimac/arch"
)

// MaxHeaderSize bounds the JSON header, as the reference safetensors reader
// does, so a corrupt length cannot make us read or allocate gigabytes.
const MaxHeaderSize = 100 << 20

// metadataKey is the reserved header entry holding string metadata.
const metadataKey = "__metadata__"

// TensorInfo locates one tensor in a shard.
type TensorInfo struct {
	Name  string
	DType arch.DType
	Shape []int64
	File  string // shard file name (base name, relative to the checkpoint dir)
	// Begin and End are the byte range relative to the start of the data
	// section (the header's data_offsets).
	Begin, End int64
}

// ParseHeader parses a safetensors file's leading bytes: data holds at least
// the 8-byte little-endian header length and the JSON header, fileSize is the
// whole file's size. It returns the tensors sorted by Begin (File left
// empty), the __metadata__ map (nil when absent) and the absolute offset of
// the data section. Every problem found is reported, one per line of the
// error, in header order.
func ParseHeader(data []byte, fileSize int64) (tensors []TensorInfo, metadata map[string]string, dataStart int64, err error) {
	tensors, metadata, dataStart, probs := parseHeader(data, fileSize)
	if len(probs) > 0 {
		return nil, nil, 0, joinProblems(probs)
	}
	return tensors, metadata, dataStart, nil
}

// joinProblems turns problem lines into one error, a line each.
func joinProblems(probs []string) error {
	errs := make([]error, len(probs))
	for i, p := range probs {
		errs[i] = errors.New(p)
	}
	return errors.Join(errs...)
}

// parseHeader is ParseHeader returning problem lines, so Open can prefix
// them with the shard's name.
func parseHeader(data []byte, fileSize int64) (tensors []TensorInfo, metadata map[string]string, dataStart int64, probs []string) {
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if fileSize < 8 {
		fail("file is %d bytes, too short for the 8-byte header length", fileSize)
		return nil, nil, 0, probs
	}
	if len(data) < 8 {
		fail("only %d bytes given, too short for the 8-byte header length", len(data))
		return nil, nil, 0, probs
	}
	n := binary.LittleEndian.Uint64(data)
	switch {
	case n < 2:
		fail("header length %d is too small (minimum 2)", n)
	case n > MaxHeaderSize:
		fail("header length %d exceeds the %d MiB limit", n, MaxHeaderSize>>20)
	case int64(n) > fileSize-8:
		fail("truncated: header needs %d bytes, file has %d", 8+n, fileSize)
	case n > uint64(len(data)-8):
		fail("header needs %d bytes, only %d given", 8+n, len(data))
	}
	if len(probs) > 0 {
		return nil, nil, 0, probs
	}
	dataStart = 8 + int64(n)
	header := data[8:dataStart]
	if !utf8.Valid(header) {
		fail("header: not valid UTF-8")
		return nil, nil, 0, probs
	}
	keys, vals, err := decodeObject(header)
	if err != nil {
		fail("header: %v", err)
		return nil, nil, 0, probs
	}

	for _, k := range keys {
		if k == metadataKey {
			var mp []string
			metadata, mp = parseMetadata(vals[k])
			for _, p := range mp {
				fail("%s: %s", metadataKey, p)
			}
			continue
		}
		info, tp := parseEntry(k, vals[k])
		for _, p := range tp {
			fail("tensor %s: %s", show(k), p)
		}
		if len(tp) == 0 {
			tensors = append(tensors, info)
		}
	}

	// Ranges: non-overlapping and inside the data section.
	slices.SortFunc(tensors, func(a, b TensorInfo) int {
		if c := compare(a.Begin, b.Begin); c != 0 {
			return c
		}
		if c := compare(a.End, b.End); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var last *TensorInfo // the non-empty tensor reaching furthest so far
	var need int64
	for i := range tensors {
		t := &tensors[i]
		need = max(need, t.End)
		if t.Begin == t.End {
			continue
		}
		if last != nil && t.Begin < last.End {
			fail("tensor %s: data_offsets [%d %d] overlap tensor %s [%d %d]", show(t.Name), t.Begin, t.End, show(last.Name), last.Begin, last.End)
		}
		if last == nil || t.End > last.End {
			last = t
		}
	}
	if have := fileSize - dataStart; need > have {
		fail("truncated: data section needs %d bytes, file has %d", need, have)
	}
	if len(probs) > 0 {
		return nil, nil, 0, probs
	}
	return tensors, metadata, dataStart, nil
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseEntry checks one tensor entry: {"dtype", "shape", "data_offsets"}.
// Other fields are tolerated, as the reference reader tolerates them.
func parseEntry(name string, raw json.RawMessage) (TensorInfo, []string) {
	var probs []string
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	info := TensorInfo{Name: name}
	if name == "" {
		fail("empty name")
	}
	_, vals, err := decodeObject(raw)
	if err != nil {
		fail("%v", err)
		return info, probs
	}

	size := 0
	if v, ok := vals["dtype"]; !ok {
		fail("dtype missing")
	} else if s, ok := jsonString(v); !ok {
		fail("dtype: not a string")
	} else if size = DTypeSize(arch.DType(s)); size == 0 {
		fail("unsupported dtype %s", strconv.Quote(clip(s)))
	} else {
		info.DType = arch.DType(s)
	}

	shapeOK := false
	if v, ok := vals["shape"]; !ok {
		fail("shape missing")
	} else {
		var sp []string
		info.Shape, sp = parseInts(v)
		for _, p := range sp {
			fail("shape%s", p)
		}
		shapeOK = len(sp) == 0
		if shapeOK && info.Shape == nil {
			info.Shape = []int64{} // a scalar; keeps Shape non-nil for every tensor
		}
	}

	offOK := false
	if v, ok := vals["data_offsets"]; !ok {
		fail("data_offsets missing")
	} else {
		offs, op := parseInts(v)
		for _, p := range op {
			fail("data_offsets%s", p)
		}
		switch {
		case len(op) > 0:
		case len(offs) != 2:
			fail("data_offsets: want [begin, end], got %d numbers", len(offs))
		case offs[0] > offs[1]:
			fail("data_offsets [%d %d]: begin after end", offs[0], offs[1])
		default:
			info.Begin, info.End = offs[0], offs[1]
			offOK = true
		}
	}

	if size > 0 && shapeOK && offOK {
		need, ok := byteSize(info.Shape, size)
		if !ok {
			fail("shape %v of %s: byte size overflows int64", info.Shape, info.DType)
		} else if have := info.End - info.Begin; have != need {
			fail("data_offsets [%d %d] hold %d bytes, shape %v of %s needs %d", info.Begin, info.End, have, info.Shape, info.DType, need)
		}
	}
	return info, probs
}

// parseInts reads a JSON list of non-negative integers written as plain
// digits (no sign, fraction, exponent or quotes, as serde's usize accepts).
// Problems are suffixes of the field name: ": not a list", "[2]: negative (-1)".
func parseInts(raw json.RawMessage) ([]int64, []string) {
	var elems []json.RawMessage
	if !startsWith(raw, '[') || json.Unmarshal(raw, &elems) != nil {
		return nil, []string{": not a list"}
	}
	var probs []string
	out := make([]int64, 0, len(elems))
	for i, e := range elems {
		s := string(bytes.TrimSpace(e))
		v, err := parseCount(s)
		if err != "" {
			probs = append(probs, fmt.Sprintf("[%d]: %s (%s)", i, err, clip(s)))
			continue
		}
		out = append(out, v)
	}
	return out, probs
}

// parseCount parses a non-negative decimal integer, naming what is wrong.
func parseCount(s string) (int64, string) {
	if strings.HasPrefix(s, "-") {
		return 0, "negative"
	}
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, "not an integer"
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, "too large"
	}
	return v, ""
}

// parseMetadata reads __metadata__: a string→string map, or null.
func parseMetadata(raw json.RawMessage) (map[string]string, []string) {
	if isNull(raw) {
		return nil, nil
	}
	keys, vals, err := decodeObject(raw)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var probs []string
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		s, ok := jsonString(vals[k])
		if !ok {
			probs = append(probs, fmt.Sprintf("value of %s is not a string", strconv.Quote(clip(k))))
			continue
		}
		m[k] = s
	}
	return m, probs
}

// decodeObject decodes exactly one JSON object into its keys (in order) and
// raw values, rejecting duplicate keys, which encoding/json would silently
// resolve to the last one, and trailing data.
func decodeObject(data []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	var keys []string
	vals := map[string]json.RawMessage{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, jsonError(err)
		}
		k, ok := kt.(string)
		if !ok {
			return nil, nil, errors.New("not valid JSON: object key is not a string")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, jsonError(err)
		}
		if _, dup := vals[k]; dup {
			return nil, nil, fmt.Errorf("duplicate key %s", strconv.Quote(clip(k)))
		}
		keys = append(keys, k)
		vals[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("not valid JSON: trailing data after the object")
	}
	return keys, vals, nil
}

func jsonError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at byte %d: %v", se.Offset, se)
	}
	return fmt.Errorf("not valid JSON: %v", err)
}

// jsonString decodes a JSON string; null and other types are not strings
// (json.Unmarshal would quietly accept null).
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if !startsWith(raw, '"') || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func startsWith(raw []byte, c byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == c
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// show prints a name as is when it is plain, quoted otherwise, so every
// problem stays on one readable line whatever the header holds.
func show(name string) string {
	plain := name != "" && len(name) <= 200
	for _, r := range name {
		if !plain {
			break
		}
		plain = unicode.IsGraphic(r) && !unicode.IsSpace(r) && r != '"' && r != utf8.RuneError
	}
	if plain {
		return name
	}
	return strconv.Quote(clip(name))
}

// clip shortens text quoted into a problem line.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
