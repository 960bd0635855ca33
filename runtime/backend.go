// Package runtime executes a plan: the backend interface and its CPU
// implementation, weight loading, resident state (KV cache, GDN recurrent
// and conv state), prefill by bucket composition, decode and sampling.
package runtime

import "github.com/aimaproject/aimac/plan"

// Mem is a block of backend memory.
type Mem interface {
	Size() int64
}

// Ref points into backend memory: a kernel argument.
type Ref struct {
	Mem    Mem
	Offset int64
}

// Backend is what the engine needs of a device: memory, copies, kernels.
// The CPU backend runs each launch with the Go reference kernel of its
// family; GPU backends launch compiled code objects.
type Backend interface {
	Name() string
	Alloc(bytes int64) (Mem, error)
	Free(m Mem)
	Upload(dst Ref, src []byte) error
	Download(dst []byte, src Ref) error
	// Zero clears n bytes at dst.
	Zero(dst Ref, n int64) error
	// Load prepares the plan's kernels (module load on a GPU).
	Load(kernels []plan.Kernel) error
	// Launch runs one launch; rows is its logical row count and dyn the
	// phase's dynamic scalars.
	Launch(k *plan.Kernel, l *plan.Launch, args []Ref, rows int, dyn map[string]int64) error
	Sync() error
	Close() error
}

// HostBinder is implemented by backends that can use host memory in place:
// the CPU backend maps checkpoint weights without copying them.
type HostBinder interface {
	Bind(data []byte) (Mem, error)
}
