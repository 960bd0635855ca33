// Package npy reads and writes NumPy .npy files holding float32 arrays, the
// format the HuggingFace oracle (oracle/hf_fixture.py) saves reference logits
// in.
//
// Write produces exactly the bytes numpy.save does for a C-ordered
// little-endian float32 array (format version 1.0, header padded so the data
// starts at a multiple of 64). Read accepts versions 1.0, 2.0 and 3.0 with
// dtype '<f4' or '<f8' (converted to float32) and checks every header field,
// so a damaged or hostile file is an error, never a panic or a huge
// allocation.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	magic = "\x93NUMPY"

	// MaxElements caps the element count Read accepts (and Write produces).
	MaxElements = 1 << 31
	// MaxDims caps the rank, as numpy 2 does (NPY_MAXDIMS).
	MaxDims = 64
	// maxHeaderLen caps the header Read will buffer; numpy itself refuses
	// headers over 10000 bytes unless told otherwise.
	maxHeaderLen = 1 << 20

	// numpy pads the header so the data is 64-byte aligned (ARRAY_ALIGN) and
	// leaves room for the first axis to grow to 21 digits
	// (GROWTH_AXIS_MAX_DIGITS) before that padding.
	arrayAlign   = 64
	growthDigits = 21

	// readChunk bounds each allocation while reading data, so a header that
	// claims more elements than the file holds costs little memory.
	readChunk = 1 << 16
)

// Write writes data as a C-ordered '<f4' array of the given shape, byte for
// byte as numpy.save would. It fails if the product of shape is not
// len(data).
func Write(w io.Writer, shape []int, data []float32) error {
	n, err := elements(shape)
	if err != nil {
		return err
	}
	if n != len(data) {
		return fmt.Errorf("npy: shape %v holds %d elements, data has %d", shape, n, len(data))
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if _, err := bw.Write(header(shape)); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	var b [4]byte
	for _, f := range data {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(f))
		if _, err := bw.Write(b[:]); err != nil {
			return fmt.Errorf("npy: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

// WriteFile writes the array to path atomically: a temporary file in the same
// directory is written, synced and renamed over path, so readers never see a
// partial file.
func WriteFile(path string, shape []int, data []float32) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = Write(f, shape, data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	return nil
}

// header returns magic, version 1.0, length and the padded header dict.
func header(shape []int) []byte {
	var d strings.Builder
	d.WriteString("{'descr': '<f4', 'fortran_order': False, 'shape': ")
	d.WriteString(shapeRepr(shape))
	d.WriteString(", }")
	if len(shape) > 0 {
		d.WriteString(strings.Repeat(" ", max(0, growthDigits-len(strconv.Itoa(shape[0])))))
	}
	hlen := d.Len() + 1 // the terminating '\n'
	pad := arrayAlign - (len(magic)+4+hlen)%arrayAlign
	var out bytes.Buffer
	out.WriteString(magic)
	out.Write([]byte{1, 0})
	binary.Write(&out, binary.LittleEndian, uint16(hlen+pad))
	out.WriteString(d.String())
	out.WriteString(strings.Repeat(" ", pad))
	out.WriteByte('\n')
	return out.Bytes()
}

// shapeRepr spells shape as Python's repr of a tuple: (), (5,), (2, 3).
func shapeRepr(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(shape) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// elements is the product of shape, checked against MaxDims and MaxElements.
func elements(shape []int) (int, error) {
	if len(shape) > MaxDims {
		return 0, fmt.Errorf("npy: %d dimensions, at most %d supported", len(shape), MaxDims)
	}
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("npy: negative dimension in shape %v", shape)
		}
		if d != 0 && n > MaxElements/d {
			return 0, fmt.Errorf("npy: shape %v has more than %d elements", shape, MaxElements)
		}
		n *= d
	}
	if n > MaxElements {
		return 0, fmt.Errorf("npy: shape %v has more than %d elements", shape, MaxElements)
	}
	return n, nil
}

// ReadFile reads a whole .npy file; bytes after the array data are an error.
func ReadFile(path string) ([]int, []float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	shape, data, err := Read(br)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			return nil, nil, fmt.Errorf("%s: npy: trailing bytes after the array data", path)
		}
		return nil, nil, fmt.Errorf("%s: npy: %w", path, err)
	}
	return shape, data, nil
}

// Read reads one array: dtype '<f4', or '<f8' rounded to float32; C order
// (Fortran order only where it is the same, at most one dimension). It reads
// no further than the array's last byte.
func Read(r io.Reader) (shape []int, data []float32, err error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, nil, fmt.Errorf("npy: reading magic: %w", noEOF(err))
	}
	if string(pre[:6]) != magic {
		return nil, nil, errors.New("npy: not a .npy file (bad magic)")
	}
	major, minor := pre[6], pre[7]
	var hlen int
	switch {
	case major == 1 && minor == 0:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, nil, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		hlen = int(binary.LittleEndian.Uint16(b[:]))
	case (major == 2 || major == 3) && minor == 0:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, nil, fmt.Errorf("npy: reading header length: %w", noEOF(err))
		}
		l := binary.LittleEndian.Uint32(b[:])
		if l > maxHeaderLen {
			return nil, nil, fmt.Errorf("npy: header of %d bytes exceeds the %d-byte limit", l, maxHeaderLen)
		}
		hlen = int(l)
	default:
		return nil, nil, fmt.Errorf("npy: unsupported format version %d.%d", major, minor)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, nil, fmt.Errorf("npy: header shorter than its declared %d bytes: %w", hlen, noEOF(err))
	}
	var text string
	if major == 3 {
		if !utf8.Valid(hdr) {
			return nil, nil, errors.New("npy: version 3.0 header is not valid UTF-8")
		}
		text = string(hdr)
	} else {
		text = latin1(hdr)
	}
	h, err := parseHeader(text)
	if err != nil {
		return nil, nil, err
	}
	n, err := elements(h.shape)
	if err != nil {
		return nil, nil, err
	}
	if h.fortran {
		big := 0
		for _, d := range h.shape {
			if d > 1 {
				big++
			}
		}
		if big > 1 {
			return nil, nil, fmt.Errorf("npy: Fortran-ordered array of shape %v is not supported (want C order)", h.shape)
		}
	}
	data, err = readData(r, n, h.itemSize)
	if err != nil {
		return nil, nil, err
	}
	return h.shape, data, nil
}

// readData decodes n little-endian floats of itemSize bytes, allocating only
// as the bytes arrive.
func readData(r io.Reader, n, itemSize int) ([]float32, error) {
	data := make([]float32, 0, min(n, readChunk))
	buf := make([]byte, min(n, readChunk)*itemSize)
	for len(data) < n {
		k := min(n-len(data), readChunk)
		b := buf[:k*itemSize]
		if got, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("npy: data truncated: %d of %d bytes present", len(data)*itemSize+got, n*itemSize)
		}
		for i := 0; i < k; i++ {
			if itemSize == 4 {
				data = append(data, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
			} else {
				data = append(data, float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))))
			}
		}
	}
	return data, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func latin1(b []byte) string {
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

type parsedHeader struct {
	shape    []int
	fortran  bool
	itemSize int
}

// parseHeader reads the header's Python dict literal. It takes exactly the
// keys numpy requires (descr, fortran_order, shape) and the literal forms
// numpy writes: quoted strings, True/False, and a tuple of non-negative
// decimal integers.
func parseHeader(text string) (parsedHeader, error) {
	p := &parser{s: text}
	var h parsedHeader
	fail := func(format string, args ...any) (parsedHeader, error) {
		return parsedHeader{}, fmt.Errorf("npy: bad header %q: %s", clip(text), fmt.Sprintf(format, args...))
	}
	p.space()
	if !p.eat('{') {
		return fail("not a dict")
	}
	seen := map[string]bool{}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, ok := p.str()
		if !ok {
			return fail("expected a quoted key at offset %d", p.i)
		}
		if seen[key] {
			return fail("key %q repeated", key)
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return fail("expected ':' after %q", key)
		}
		p.space()
		switch key {
		case "descr":
			d, ok := p.str()
			if !ok {
				return fail("descr is not a string")
			}
			switch d {
			case "<f4":
				h.itemSize = 4
			case "<f8":
				h.itemSize = 8
			default:
				return fail("dtype %q is not supported (want '<f4' or '<f8')", d)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.fortran = true
			case p.word("False"):
				h.fortran = false
			default:
				return fail("fortran_order is not True or False")
			}
		case "shape":
			s, err := p.tuple()
			if err != nil {
				return fail("shape: %v", err)
			}
			h.shape = s
		default:
			return fail("unexpected key %q", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return fail("expected ',' or '}' at offset %d", p.i)
		}
		break
	}
	p.space()
	if p.i != len(p.s) {
		return fail("unexpected text after the dict")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return fail("missing key %q", k)
		}
	}
	return h, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// parser scans the subset of Python literal syntax .npy headers use.
type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// word consumes w if it stands alone (not the prefix of a longer name).
func (p *parser) word(w string) bool {
	if !strings.HasPrefix(p.s[p.i:], w) {
		return false
	}
	end := p.i + len(w)
	if end < len(p.s) {
		c := p.s[end]
		if c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	p.i = end
	return true
}

// str reads a '...' or "..." literal without escapes (none occur in the
// strings a float header holds).
func (p *parser) str() (string, bool) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsAny(v, "\\\n") {
		return "", false
	}
	p.i += end + 2
	return v, true
}

// tuple reads (), (n,), (n, m), … with an optional trailing comma.
func (p *parser) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, errors.New("not a tuple")
	}
	dims := []int{}
	comma := false // whether the last dimension was followed by a comma
	for {
		p.space()
		if p.eat(')') {
			if len(dims) == 1 && !comma {
				return nil, errors.New("(n) is a number, not a tuple; want (n,)")
			}
			return dims, nil
		}
		if len(dims) > 0 && !comma {
			return nil, fmt.Errorf("expected ',' or ')' at offset %d", p.i)
		}
		if len(dims) == MaxDims {
			return nil, fmt.Errorf("more than %d dimensions", MaxDims)
		}
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if p.i == start {
			return nil, fmt.Errorf("expected a non-negative integer at offset %d", start)
		}
		d, err := strconv.Atoi(p.s[start:p.i])
		if err != nil || d > MaxElements {
			return nil, fmt.Errorf("dimension %s is too large", p.s[start:p.i])
		}
		dims = append(dims, d)
		p.space()
		comma = p.eat(',')
	}
}
