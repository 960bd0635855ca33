package hipcc

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// makeBundle lays out a clang offload bundle holding the given entries.
func makeBundle(ids []string, objs [][]byte) []byte {
	var hdr bytes.Buffer
	hdr.WriteString(bundleMagic)
	u64 := func(v int) { binary.Write(&hdr, binary.LittleEndian, uint64(v)) }
	size := len(bundleMagic) + 8
	for _, id := range ids {
		size += 24 + len(id)
	}
	u64(len(ids))
	off := size
	for i, id := range ids {
		u64(off)
		u64(len(objs[i]))
		u64(len(id))
		hdr.WriteString(id)
		off += len(objs[i])
	}
	for _, o := range objs {
		hdr.Write(o)
	}
	return hdr.Bytes()
}

func TestAMDGPUObject(t *testing.T) {
	elf := []byte("\x7fELF\x02\x01\x01 code object")
	got, err := AMDGPUObject(elf)
	if err != nil || !bytes.Equal(got, elf) {
		t.Errorf("bare ELF: %q, %v", got, err)
	}
	b := makeBundle([]string{"host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx1151"}, [][]byte{nil, elf})
	got, err = AMDGPUObject(b)
	if err != nil || !bytes.Equal(got, elf) {
		t.Errorf("bundle: %q, %v", got, err)
	}
	bad := map[string][]byte{
		"text":       []byte("hello"),
		"compressed": []byte("CCOB\x01\x00"),
		"truncated":  b[:len(bundleMagic)+12],
		"short body": b[:len(b)-3],
		"no gpu":     makeBundle([]string{"host-x86_64-unknown-linux-gnu-"}, [][]byte{nil}),
		"two gpus": makeBundle([]string{"hipv4-amdgcn-amd-amdhsa--gfx1151", "hipv4-amdgcn-amd-amdhsa--gfx1100"},
			[][]byte{elf, elf}),
		"not elf": makeBundle([]string{"hipv4-amdgcn-amd-amdhsa--gfx1151"}, [][]byte{[]byte("junk")}),
	}
	for name, data := range bad {
		if got, err := AMDGPUObject(data); err == nil {
			t.Errorf("%s: got %q, want an error", name, got)
		} else if strings.Contains(err.Error(), "panic") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzAMDGPUObject checks the bundle reader never panics or returns bytes
// outside its input.
func FuzzAMDGPUObject(f *testing.F) {
	f.Add(makeBundle([]string{"hipv4-amdgcn-amd-amdhsa--gfx1151"}, [][]byte{[]byte("\x7fELF!")}))
	f.Add([]byte(bundleMagic + "\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		AMDGPUObject(data)
	})
}
