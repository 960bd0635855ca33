package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/aimaproject/aimac/arch"
)

// WriteTensor is one tensor to write: raw little-endian element bytes.
type WriteTensor struct {
	Name  string
	DType arch.DType
	Shape []int64
	Data  []byte
}

// WriteFile writes one .safetensors file: the 8-byte little-endian header
// length, the JSON header (__metadata__ first when metadata is non-nil, then
// the tensors in the given order) padded with spaces to a multiple of 8, then
// the tensors' data back to back. It writes path+".tmp" and renames it, so a
// failed write never leaves a half file at path.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	header, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeAtomic(path, func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, t := range tensors {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeHeader validates the tensors and renders the padded JSON header.
func encodeHeader(tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	sep := func() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
	}
	if metadata != nil {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(`"` + metadataKey + `":{`)
		for i, k := range keys {
			if !utf8.ValidString(k) || !utf8.ValidString(metadata[k]) {
				return nil, fmt.Errorf("metadata %s: not valid UTF-8", strconv.Quote(k))
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(&b, k)
			b.WriteByte(':')
			writeJSONString(&b, metadata[k])
		}
		b.WriteByte('}')
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		switch {
		case t.Name == "":
			return nil, errors.New("tensor with an empty name")
		case t.Name == metadataKey:
			return nil, fmt.Errorf("tensor %s: reserved name", metadataKey)
		case !utf8.ValidString(t.Name):
			return nil, fmt.Errorf("tensor %s: name is not valid UTF-8", strconv.Quote(t.Name))
		case seen[t.Name]:
			return nil, fmt.Errorf("tensor %s: duplicate name", show(t.Name))
		}
		seen[t.Name] = true
		size := DTypeSize(t.DType)
		if size == 0 {
			return nil, fmt.Errorf("tensor %s: unsupported dtype %q", show(t.Name), t.DType)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %s: negative dimension in shape %v", show(t.Name), t.Shape)
			}
		}
		need, ok := byteSize(t.Shape, size)
		if !ok {
			return nil, fmt.Errorf("tensor %s: shape %v of %s overflows int64", show(t.Name), t.Shape, t.DType)
		}
		if int64(len(t.Data)) != need {
			return nil, fmt.Errorf("tensor %s: %d data bytes, shape %v of %s needs %d", show(t.Name), len(t.Data), t.Shape, t.DType, need)
		}
		sep()
		writeJSONString(&b, t.Name)
		fmt.Fprintf(&b, `:{"dtype":"%s","shape":[`, t.DType)
		for i, d := range t.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, off+need)
		off += need
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("header is %d bytes, over the %d MiB limit", b.Len(), MaxHeaderSize>>20)
	}
	return b.Bytes(), nil
}

// writeJSONString writes s as a JSON string without HTML escaping, so names
// read back byte for byte as written.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a valid UTF-8 string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// WriteIndex writes model.safetensors.index.json:
// {"metadata":{"total_size":N},"weight_map":{name:file,...}}, keys sorted,
// indented by two spaces, the layout Hugging Face writes.
func WriteIndex(path string, totalSize int64, weightMap map[string]string) error {
	if totalSize < 0 {
		return fmt.Errorf("write %s: negative total_size %d", path, totalSize)
	}
	data := encodeIndex(totalSize, weightMap)
	return writeAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

func encodeIndex(totalSize int64, weightMap map[string]string) []byte {
	type metadata struct {
		TotalSize int64 `json:"total_size"`
	}
	v := struct {
		Metadata  metadata          `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{metadata{totalSize}, weightMap}
	if v.WeightMap == nil {
		v.WeightMap = map[string]string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // strings and an int64 always encode
	return b.Bytes()
}

// writeAtomic writes path+".tmp" through fill, syncs it and renames it over
// path; on any failure the temporary file is removed.
func writeAtomic(path string, fill func(io.Writer) error) (err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err = fill(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
