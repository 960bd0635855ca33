package hipcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

const (
	bundleMagic           = "__CLANG_OFFLOAD_BUNDLE__"
	compressedBundleMagic = "CCOB"
)

// AMDGPUObject returns the AMD GPU ELF code object in data: data itself when
// it is an ELF file, or the single amdgcn entry of a clang offload bundle
// (the format hipcc --genco writes). Tools that read ELF (llvm-readelf, the
// resource report) need the bare object; HIP's module loader accepts both.
func AMDGPUObject(data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, []byte("\x7fELF")) {
		return data, nil
	}
	if bytes.HasPrefix(data, []byte(compressedBundleMagic)) {
		return nil, fmt.Errorf("compressed offload bundle: compile without --offload-compress")
	}
	if !bytes.HasPrefix(data, []byte(bundleMagic)) {
		return nil, fmt.Errorf("not an ELF object or offload bundle (starts %q)", data[:min(len(data), 8)])
	}
	// Layout: magic, u64 entry count, then per entry u64 offset, u64 size,
	// u64 id length and the id ("hipv4-amdgcn-amd-amdhsa--gfx1151"); all
	// little endian.
	p := len(bundleMagic)
	u64 := func() (uint64, error) {
		if p+8 > len(data) {
			return 0, fmt.Errorf("offload bundle truncated at byte %d", p)
		}
		v := binary.LittleEndian.Uint64(data[p:])
		p += 8
		return v, nil
	}
	n, err := u64()
	if err != nil {
		return nil, err
	}
	if n > 1024 {
		return nil, fmt.Errorf("offload bundle claims %d entries", n)
	}
	var found []byte
	var ids []string
	for range n {
		off, err1 := u64()
		size, err2 := u64()
		idLen, err3 := u64()
		if err := firstErr(err1, err2, err3); err != nil {
			return nil, err
		}
		if idLen > uint64(len(data)-p) {
			return nil, fmt.Errorf("offload bundle entry id runs past the end")
		}
		id := string(data[p : p+int(idLen)])
		p += int(idLen)
		ids = append(ids, id)
		if off > uint64(len(data)) || size > uint64(len(data))-off {
			return nil, fmt.Errorf("offload bundle entry %q runs past the end", id)
		}
		if !strings.Contains(id, "amdgcn-") {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("offload bundle holds several GPU objects (%s); compile for one --offload-arch", strings.Join(ids, ", "))
		}
		found = data[off : off+size]
	}
	if found == nil {
		return nil, fmt.Errorf("offload bundle has no amdgcn entry (%s)", strings.Join(ids, ", "))
	}
	if !bytes.HasPrefix(found, []byte("\x7fELF")) {
		return nil, fmt.Errorf("offload bundle's amdgcn entry is not ELF")
	}
	return found, nil
}

// firstErr keeps the header reader's error checks to one line per entry.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
