//go:build unix

package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps a whole file read-only: weights are paged in on demand and
// shared with the page cache instead of copied into the Go heap.
func mapFile(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error { return unix.Munmap(b) }
