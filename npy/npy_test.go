package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The golden files in testdata were written by numpy 2.5.2 through
// testdata/numpy_golden.py.

// bitsEqual compares floats by bit pattern, so NaN payloads and -0 count.
var bitsEqual = cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })

func TestHeaderGolden(t *testing.T) {
	// numpy.save(np.zeros((2, 3), '<f4')): dict, 20 growth spaces plus alignment padding, '\n'.
	want := "\x93NUMPY\x01\x00v\x00" +
		"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + strings.Repeat(" ", 58) + "\n"
	got := string(header([]int{2, 3}))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("header (-numpy +ours):\n%s", diff)
	}
	if len(got)%64 != 0 {
		t.Errorf("header is %d bytes, want a multiple of 64", len(got))
	}
}

func TestWriteMatchesNumpy(t *testing.T) {
	for _, name := range []string{"f4_2x3", "f4_special", "f4_scalar", "f4_empty", "f4_2x0", "f4_1234567x0", "f4_2x3x4"} {
		t.Run(name, func(t *testing.T) {
			golden, err := os.ReadFile(filepath.Join("testdata", name+".npy"))
			if err != nil {
				t.Fatal(err)
			}
			shape, data, err := Read(bytes.NewReader(golden))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := Write(&buf, shape, data); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), golden) {
				t.Errorf("Write differs from numpy.save:\nnumpy %q\nours  %q", golden, buf.Bytes())
			}
		})
	}
}

func TestReadNumpyFiles(t *testing.T) {
	x23 := []float32{-1, -0.5, 0, 0.5, 1, 1.5}
	x234 := make([]float32, 24)
	for i := range x234 {
		x234[i] = (float32(i) - 11) / 8
	}
	tests := []struct {
		file    string
		shape   []int
		data    []float32
		wantErr string
	}{
		{file: "f4_2x3", shape: []int{2, 3}, data: x23},
		{file: "f4_2x3_v2", shape: []int{2, 3}, data: x23},
		{file: "f4_2x3_v3", shape: []int{2, 3}, data: x23},
		{file: "f4_2x3x4", shape: []int{2, 3, 4}, data: x234},
		{file: "f4_special", shape: []int{8}, data: []float32{
			0, math.Float32frombits(0x80000000), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(0x7fc00000), math.Float32frombits(1), math.MaxFloat32, -1.5,
		}},
		{file: "f4_scalar", shape: []int{}, data: []float32{3.25}},
		{file: "f4_empty", shape: []int{0}, data: []float32{}},
		{file: "f4_2x0", shape: []int{2, 0}, data: []float32{}},
		{file: "f4_1234567x0", shape: []int{1234567, 0}, data: []float32{}},
		// '<f8' is rounded to float32: 1e-300 underflows to 0, 1e300 overflows to +Inf.
		{file: "f8_3x2", shape: []int{3, 2}, data: []float32{1, -2.5, 0, float32(math.Inf(1)), 0.1, 3}},
		{file: "i4_3", wantErr: `dtype "<i4" is not supported`},
		{file: "f4be_3", wantErr: `dtype ">f4" is not supported`},
		{file: "f4_fortran_2x3", wantErr: "Fortran-ordered array of shape [2 3] is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			shape, data, err := ReadFile(filepath.Join("testdata", tc.file+".npy"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.shape, shape); diff != "" {
				t.Errorf("shape (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.data, data, bitsEqual); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
}

// file builds a .npy stream by hand: magic, version, header length, header, data.
func file(major byte, hdr string, data []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	b.Write([]byte{major, 0})
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

func f4bytes(vals ...float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func hdr(descr, fortran, shape string) string {
	return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n"
}

func TestRead(t *testing.T) {
	three := f4bytes(1, 2, 3)
	tests := []struct {
		name    string
		in      []byte
		shape   []int
		data    []float32
		wantErr string
	}{
		{name: "empty input", in: nil, wantErr: "reading magic"},
		{name: "bad magic", in: []byte("\x93NUMPZ\x01\x00\x00\x00"), wantErr: "bad magic"},
		{name: "version 1.1", in: []byte("\x93NUMPY\x01\x01\x00\x00"), wantErr: "unsupported format version 1.1"},
		{name: "version 4.0", in: []byte("\x93NUMPY\x04\x00\x00\x00\x00\x00"), wantErr: "unsupported format version 4.0"},
		{name: "no header length", in: []byte("\x93NUMPY\x01\x00\x05"), wantErr: "reading header length"},
		{name: "header cut short", in: []byte("\x93NUMPY\x01\x00\x40\x00{'descr'"), wantErr: "header shorter than its declared 64 bytes"},
		{name: "v2 header over limit", in: []byte("\x93NUMPY\x02\x00\x00\x00\x00\x40"), wantErr: "exceeds"},
		{name: "not a dict", in: file(1, "[1, 2]\n", nil), wantErr: "not a dict"},
		{name: "missing shape", in: file(1, "{'descr': '<f4', 'fortran_order': False}", nil), wantErr: `missing key "shape"`},
		{name: "extra key", in: file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", three), wantErr: `unexpected key "x"`},
		{name: "repeated key", in: file(1, "{'descr': '<f4', 'descr': '<f4'}", nil), wantErr: `key "descr" repeated`},
		{name: "descr not a string", in: file(1, hdr("4", "False", "(3,)"), three), wantErr: "descr is not a string"},
		{name: "unterminated string", in: file(1, "{'descr: '<f4'}", nil), wantErr: "expected ':'"},
		{name: "fortran not bool", in: file(1, hdr("'<f4'", "0", "(3,)"), three), wantErr: "fortran_order is not True or False"},
		{name: "fortran prefix", in: file(1, hdr("'<f4'", "Falsey", "(3,)"), three), wantErr: "fortran_order is not True or False"},
		{name: "negative dim", in: file(1, hdr("'<f4'", "False", "(2, -3)"), nil), wantErr: "non-negative integer"},
		{name: "float dim", in: file(1, hdr("'<f4'", "False", "(2.5,)"), nil), wantErr: "expected ',' or ')'"},
		{name: "number not tuple", in: file(1, hdr("'<f4'", "False", "(3)"), three), wantErr: "not a tuple"},
		{name: "list shape", in: file(1, hdr("'<f4'", "False", "[3]"), three), wantErr: "not a tuple"},
		{name: "missing comma", in: file(1, hdr("'<f4'", "False", "(1 3)"), three), wantErr: "expected ',' or ')'"},
		{name: "huge dim", in: file(1, hdr("'<f4'", "False", "(99999999999999999999999,)"), nil), wantErr: "too large"},
		{name: "product overflow", in: file(1, hdr("'<f4'", "False", "(65536, 65536)"), nil), wantErr: "more than 2147483648 elements"},
		{name: "too many dims", in: file(1, hdr("'<f4'", "False", "("+strings.Repeat("1, ", 65)+")"), nil), wantErr: "more than 64 dimensions"},
		{name: "text after dict", in: file(1, hdr("'<f4'", "False", "(3,)")+"x", three), wantErr: "unexpected text after the dict"},
		{name: "data truncated", in: file(1, hdr("'<f4'", "False", "(4,)"), three), wantErr: "data truncated: 12 of 16 bytes present"},
		// A header claiming 2^31 elements over a 12-byte body must fail fast, not allocate 8 GiB.
		{name: "claims 2^31 elements", in: file(1, hdr("'<f4'", "False", "(2147483648,)"), three), wantErr: "data truncated: 12 of 8589934592 bytes"},
		{name: "claims 2^31+1 elements", in: file(1, hdr("'<f4'", "False", "(2147483649,)"), three), wantErr: "dimension 2147483649 is too large"},
		{name: "claims 2^30 x 3 elements", in: file(1, hdr("'<f4'", "False", "(1073741824, 3)"), three), wantErr: "more than 2147483648 elements"},
		{name: "v3 bad utf-8", in: file(3, "{'descr': '\xff'}", nil), wantErr: "not valid UTF-8"},
		{name: "v2", in: file(2, hdr("'<f4'", "False", "(3,)"), three), shape: []int{3}, data: []float32{1, 2, 3}},
		{name: "v3", in: file(3, hdr("'<f4'", "False", "(3,)"), three), shape: []int{3}, data: []float32{1, 2, 3}},
		{name: "double quotes, no spaces", in: file(1, `{"descr":"<f4","fortran_order":False,"shape":(3,)}`, three), shape: []int{3}, data: []float32{1, 2, 3}},
		{name: "trailing comma in tuple", in: file(1, hdr("'<f4'", "False", "(1, 3,)"), three), shape: []int{1, 3}, data: []float32{1, 2, 3}},
		{name: "no trailing comma in dict", in: file(1, "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}", three), shape: []int{3}, data: []float32{1, 2, 3}},
		{name: "fortran 1-d is C order", in: file(1, hdr("'<f4'", "True", "(3,)"), three), shape: []int{3}, data: []float32{1, 2, 3}},
		{name: "fortran 3x1 is C order", in: file(1, hdr("'<f4'", "True", "(3, 1)"), three), shape: []int{3, 1}, data: []float32{1, 2, 3}},
		{name: "fortran 2x3", in: file(1, hdr("'<f4'", "True", "(2, 3)"), f4bytes(1, 2, 3, 4, 5, 6)), wantErr: "Fortran-ordered"},
		{name: "0-d", in: file(1, hdr("'<f4'", "False", "()"), f4bytes(7)), shape: []int{}, data: []float32{7}},
		{name: "f8", in: file(1, hdr("'<f8'", "False", "(1,)"), binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.1))), shape: []int{1}, data: []float32{0.1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shape, data, err := Read(bytes.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.shape, shape); diff != "" {
				t.Errorf("shape (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.data, data, bitsEqual); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][]int{{}, {0}, {1}, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4, 5}, {150, 512}, {1234567, 0}} {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = math.Float32frombits(rng.Uint32()) // every bit pattern, NaNs included
		}
		var buf bytes.Buffer
		if err := Write(&buf, shape, data); err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		b := buf.Bytes()
		start := len(b) - 4*n
		if start%64 != 0 || b[start-1] != '\n' {
			t.Errorf("%v: data starts at %d (want a multiple of 64 after '\\n')", shape, start)
		}
		gotShape, got, err := Read(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		if diff := cmp.Diff(shape, gotShape); diff != "" {
			t.Errorf("shape (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(data, got, bitsEqual); diff != "" {
			t.Errorf("%v: data (-want +got):\n%s", shape, diff)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		shape   []int
		n       int
		wantErr string
	}{
		{name: "too few values", shape: []int{2, 3}, n: 5, wantErr: "holds 6 elements, data has 5"},
		{name: "too many values", shape: []int{}, n: 2, wantErr: "holds 1 elements, data has 2"},
		{name: "negative", shape: []int{-1}, n: 0, wantErr: "negative dimension"},
		{name: "overflow", shape: []int{1 << 20, 1 << 20}, n: 0, wantErr: "more than 2147483648 elements"},
		{name: "rank", shape: make([]int, 65), n: 0, wantErr: "65 dimensions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.shape, make([]float32, tc.n))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing", buf.Len())
			}
		})
	}
	if err := Write(failWriter{}, []int{3}, []float32{1, 2, 3}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing writer: error %v, want disk full", err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.npy")
	for i, data := range [][]float32{{1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1}} { // the second overwrites the first
		if err := WriteFile(path, []int{3, 2}, data); err != nil {
			t.Fatal(err)
		}
		shape, got, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{3, 2}, shape); diff != "" {
			t.Errorf("write %d: shape (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(data, got); diff != "" {
			t.Errorf("write %d: data (-want +got):\n%s", i, diff)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if err := WriteFile(path, []int{2}, []float32{1}); err == nil {
		t.Error("WriteFile with mismatched data succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries after writes, want only x.npy (temporary files left?)", len(entries))
	}
	if _, _, err := ReadFile(path); err != nil {
		t.Errorf("a failed WriteFile damaged the existing file: %v", err)
	}

	// Bytes after the array are an error for ReadFile.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.npy")
	if err := os.WriteFile(junk, append(b, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFile(junk); err == nil || !strings.Contains(err.Error(), "trailing bytes") {
		t.Errorf("trailing byte: error %v", err)
	}
	if _, _, err := ReadFile(filepath.Join(dir, "missing.npy")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error %v, want ErrNotExist", err)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.npy"), []int{1}, []float32{1}); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func FuzzRead(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.npy"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(file(1, hdr("'<f4'", "False", "(2147483648,)"), nil))
	f.Add(file(2, hdr("'<f8'", "True", "(3, 1)"), make([]byte, 24)))
	f.Add(file(3, `{"descr":"<f4","fortran_order":False,"shape":()}`, make([]byte, 4)))
	f.Fuzz(func(t *testing.T, in []byte) {
		shape, data, err := Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		n := 1
		for _, d := range shape {
			n *= d
		}
		if n != len(data) {
			t.Fatalf("shape %v but %d values", shape, len(data))
		}
		var buf bytes.Buffer
		if err := Write(&buf, shape, data); err != nil {
			t.Fatalf("re-writing what Read returned: %v", err)
		}
		shape2, data2, err := Read(&buf)
		if err != nil {
			t.Fatalf("re-reading: %v", err)
		}
		if !cmp.Equal(shape, shape2) || !cmp.Equal(data, data2, bitsEqual) {
			t.Fatal("Write then Read changed the array")
		}
	})
}
