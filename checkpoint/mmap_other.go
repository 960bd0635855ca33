//go:build !unix

package checkpoint

import (
	"io"
	"os"
)

// mapFile reads the whole file where mmap is unavailable.
func mapFile(f *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	_, err := io.ReadFull(f, b)
	return b, err
}

func unmapFile([]byte) error { return nil }
