package checkpoint

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseHeader checks that no header panics the parser, and that every
// header it accepts describes a well-formed file that survives a rewrite.
func FuzzParseHeader(f *testing.F) {
	// Seeds are built in memory: fuzz workers rerun this setup, and disk
	// writes would slow every start.
	valid := fileBytes(f, newFixture(f).shard(shard3).tensors, map[string]string{"format": "pt"})
	f.Add(valid, uint16(0))
	f.Add(valid[:200], uint16(0))
	f.Add(valid[:len(valid)-1], uint16(1))
	f.Add(rawFile(`{}`, 0), uint16(0))
	f.Add(rawFile(`{"__metadata__":{"a":"b"},"t":{"dtype":"F16","shape":[2,0],"data_offsets":[0,0]}}`, 0), uint16(0))
	f.Add(rawFile(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, 8), uint16(0))
	f.Add(rawFile(`{"t":{"dtype":"F32","shape":[4611686018427387904,2],"data_offsets":[0,8]}}`, 8), uint16(0))
	f.Add(rawFile(`{"t":{"dtype":"BF16","shape":[-1,1.5],"data_offsets":[1e3,"2"]},"t":{}}`, 0), uint16(0))
	f.Add(rawFile(`{"t":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, 4), uint16(4))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'}, uint16(0))
	f.Add([]byte{2, 0, 0}, uint16(100))

	f.Fuzz(func(t *testing.T, data []byte, extra uint16) {
		fileSize := int64(len(data)) + int64(extra)
		tensors, meta, start, err := ParseHeader(data, fileSize)
		if err != nil {
			if tensors != nil || meta != nil || start != 0 {
				t.Fatalf("results returned with error %v", err)
			}
			return
		}
		if start != 8+int64(binary.LittleEndian.Uint64(data)) || start > int64(len(data)) {
			t.Fatalf("dataStart %d for a file of %d bytes given", start, len(data))
		}
		seen := map[string]bool{}
		var reach int64 // furthest end of a non-empty tensor so far
		for i, ti := range tensors {
			need, ok := byteSize(ti.Shape, DTypeSize(ti.DType))
			switch {
			case ti.Name == "" || seen[ti.Name]:
				t.Fatalf("tensor %d: empty or repeated name %q", i, ti.Name)
			case ti.Shape == nil || !ok || ti.End-ti.Begin != need:
				t.Fatalf("tensor %q: shape %v of %s in [%d %d]", ti.Name, ti.Shape, ti.DType, ti.Begin, ti.End)
			case ti.Begin < 0 || ti.End > fileSize-start:
				t.Fatalf("tensor %q: [%d %d] outside a %d-byte data section", ti.Name, ti.Begin, ti.End, fileSize-start)
			case i > 0 && ti.Begin < tensors[i-1].Begin:
				t.Fatalf("tensor %q: not sorted by Begin", ti.Name)
			case ti.Begin < ti.End && ti.Begin < reach:
				t.Fatalf("tensor %q: [%d %d] overlaps an earlier tensor ending at %d", ti.Name, ti.Begin, ti.End, reach)
			}
			seen[ti.Name] = true
			if ti.Begin < ti.End {
				reach = max(reach, ti.End)
			}
		}
		if extra != 0 {
			return // the data is not all here to rewrite
		}
		// Rewriting what was read gives a file that reads back the same.
		w := make([]WriteTensor, len(tensors))
		for i, ti := range tensors {
			w[i] = WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: data[start+ti.Begin : start+ti.End]}
		}
		file := fileBytes(t, w, meta)
		again, meta2, start2, err := ParseHeader(file, int64(len(file)))
		if err != nil {
			t.Fatalf("rewritten header rejected: %v", err)
		}
		if diff := cmp.Diff(meta, meta2); diff != "" {
			t.Fatalf("metadata changed (-first +rewritten):\n%s", diff)
		}
		if len(again) != len(tensors) {
			t.Fatalf("%d tensors after rewrite, %d before", len(again), len(tensors))
		}
		byName := map[string]TensorInfo{}
		for _, ti := range again {
			byName[ti.Name] = ti
		}
		for _, ti := range tensors {
			a, ok := byName[ti.Name]
			if !ok || a.DType != ti.DType || !cmp.Equal(a.Shape, ti.Shape) ||
				!bytes.Equal(file[start2+a.Begin:start2+a.End], data[start+ti.Begin:start+ti.End]) {
				t.Fatalf("tensor %q changed by the rewrite: %+v → %+v", ti.Name, ti, a)
			}
		}
	})
}

// fileBytes is WriteFile's output, in memory.
func fileBytes(t testing.TB, tensors []WriteTensor, meta map[string]string) []byte {
	header, err := encodeHeader(tensors, meta)
	if err != nil {
		t.Fatalf("encoding a header: %v", err)
	}
	file := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	file = append(file, header...)
	for _, wt := range tensors {
		file = append(file, wt.Data...)
	}
	return file
}

// FuzzIndex checks that no index panics the parser and that every accepted
// index names only plain shard files and survives WriteIndex's encoding.
func FuzzIndex(f *testing.F) {
	// A few entries: mutations of a large index would mostly re-parse the same keys.
	f.Add(encodeIndex(4096, map[string]string{
		"lm_head.weight": shard3, np + "norm.weight": shard2, np + "embed_tokens.weight": shard1,
	}))
	f.Add([]byte(`{"metadata":{"total_size":7.0e3},"weight_map":{"a":"s"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../s","b":1,"":"x","a":"y"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"metadata":null,"weight_map":{"a\u0000":"b\u00e9"}} `))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		wm, total, err := ParseIndex(data)
		if err != nil {
			if wm != nil || total != 0 {
				t.Fatalf("results returned with error %v", err)
			}
			return
		}
		if len(wm) == 0 || total < -1 {
			t.Fatalf("accepted an index with %d tensors, total_size %d", len(wm), total)
		}
		for name, file := range wm {
			if name == "" || !plainFileName(file) {
				t.Fatalf("accepted tensor %q in shard %q", name, file)
			}
		}
		wm2, total2, err := ParseIndex(encodeIndex(max(total, 0), wm))
		if err != nil {
			t.Fatalf("re-encoded index rejected: %v", err)
		}
		if diff := cmp.Diff(wm, wm2); diff != "" || total2 != max(total, 0) {
			t.Fatalf("index changed by re-encoding (total %d → %d):\n%s", total, total2, diff)
		}
	})
}
