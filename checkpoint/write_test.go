package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/google/go-cmp/cmp"
)

func TestWriteFileLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	err := WriteFile(path, []WriteTensor{
		{Name: "w<1>", DType: arch.BF16, Shape: []int64{2}, Data: []byte{1, 2, 3, 4}},
		{Name: "s", DType: U8, Shape: []int64{}, Data: []byte{9}},
	}, map[string]string{"z": "1", "format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	header := `{"__metadata__":{"format":"pt","z":"1"},"w<1>":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"s":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}    `
	want := append(rawFile(header, 0), 1, 2, 3, 4, 9)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file bytes (-want +got):\n%s", diff)
	}
	if (8+len(header))%8 != 0 {
		t.Errorf("header of %d bytes leaves the data unaligned", len(header))
	}
	assertNoTemp(t, path)

	// Without metadata no __metadata__ entry is written.
	if err := WriteFile(path, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	if diff := cmp.Diff(rawFile("{}      ", 0), got); diff != "" {
		t.Errorf("empty file (-want +got):\n%s", diff)
	}
}

func TestWriteFileRoundTrip(t *testing.T) {
	f := newFixture(t)
	sf := f.shard(shard1)
	path := filepath.Join(t.TempDir(), sf.name)
	if err := WriteFile(path, sf.tensors, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tensors, meta, start, err := ParseHeader(data, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"format": "pt"}, meta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if len(tensors) != len(sf.tensors) {
		t.Fatalf("%d tensors read, %d written", len(tensors), len(sf.tensors))
	}
	for i, w := range sf.tensors { // written back to back in order, so sorted by Begin too
		got := tensors[i]
		if got.Name != w.Name || got.DType != w.DType || !cmp.Equal(got.Shape, w.Shape) ||
			!bytes.Equal(data[start+got.Begin:start+got.End], w.Data) {
			t.Errorf("tensor %d: read %+v, wrote %s %s %v", i, got, w.Name, w.DType, w.Shape)
		}
	}
}

func TestWriteFileErrors(t *testing.T) {
	bf := func(name string, n int, shape ...int64) WriteTensor {
		return WriteTensor{Name: name, DType: arch.BF16, Shape: shape, Data: make([]byte, n)}
	}
	tests := []struct {
		name    string
		tensors []WriteTensor
		meta    map[string]string
		want    string
	}{
		{"data length", []WriteTensor{bf("a", 6, 2, 2)}, nil, "tensor a: 6 data bytes, shape [2 2] of BF16 needs 8"},
		{"duplicate", []WriteTensor{bf("a", 2, 1), bf("a", 2, 1)}, nil, "tensor a: duplicate name"},
		{"empty name", []WriteTensor{bf("", 2, 1)}, nil, "tensor with an empty name"},
		{"reserved name", []WriteTensor{bf("__metadata__", 2, 1)}, nil, "tensor __metadata__: reserved name"},
		{"bad UTF-8 name", []WriteTensor{bf("a\xff", 2, 1)}, nil, `tensor "a\xff": name is not valid UTF-8`},
		{"unknown dtype", []WriteTensor{{Name: "a", DType: "Q4", Shape: []int64{1}, Data: []byte{0}}}, nil, `tensor a: unsupported dtype "Q4"`},
		{"negative dimension", []WriteTensor{bf("a", 0, 2, -1)}, nil, "tensor a: negative dimension in shape [2 -1]"},
		{"overflow", []WriteTensor{bf("a", 0, 1<<62, 4)}, nil, "tensor a: shape [4611686018427387904 4] of BF16 overflows int64"},
		{"bad UTF-8 metadata", nil, map[string]string{"k": "\xff"}, `metadata "k": not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.safetensors")
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			err := WriteFile(path, tt.tensors, tt.meta)
			if err == nil {
				t.Fatal("no error")
			}
			if want := "write " + path + ": " + tt.want; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
			if got, _ := os.ReadFile(path); string(got) != "old" {
				t.Errorf("file changed to %q by a failed write", got)
			}
			assertNoTemp(t, path)
		})
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// A directory where the temporary file should go makes the write fail.
	path := filepath.Join(dir, "x.safetensors")
	if err := os.Mkdir(path+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, nil, nil); err == nil {
		t.Error("WriteFile over a directory: no error")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed write left a file")
	}
	if err := WriteIndex(filepath.Join(dir, "missing", IndexFile), 0, nil); err == nil {
		t.Error("WriteIndex into a missing directory: no error")
	}
	if err := WriteIndex(filepath.Join(dir, IndexFile), -1, nil); err == nil || !strings.Contains(err.Error(), "negative total_size -1") {
		t.Errorf("WriteIndex(-1) = %v", err)
	}
}

func TestWriteIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), IndexFile)
	wm := map[string]string{"lm_head.weight": "b.safetensors", "a<&>": "a.safetensors"}
	if err := WriteIndex(path, 1234, wm); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "metadata": {
    "total_size": 1234
  },
  "weight_map": {
    "a<&>": "a.safetensors",
    "lm_head.weight": "b.safetensors"
  }
}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}
	assertNoTemp(t, path)
	gotMap, total, err := ParseIndex(got)
	if err != nil || total != 1234 {
		t.Fatalf("ParseIndex: total %d, %v", total, err)
	}
	if diff := cmp.Diff(wm, gotMap); diff != "" {
		t.Errorf("weight map round trip (-want +got):\n%s", diff)
	}
}

func assertNoTemp(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path + ".tmp"); err == nil {
		t.Errorf("%s.tmp left behind", filepath.Base(path))
	}
}
