// Package runtime executes a plan: the backend interface and its CPU
// implementation, weight loading, resident state (KV cache, GDN recurrent
// and conv state), prefill by bucket composition, decode and sampling.
package runtime

import (
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

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
	// SetParams writes the parameter block that GPU kernels read at run
	// time (ir.Slot); launches enqueued after it see the new values.
	SetParams(p *Params) error
	// Launch runs one launch; rows is its logical row count and p the
	// parameter block as last set (the CPU kernels read p; GPU kernels read
	// the same values from the device copy SetParams wrote). A negative
	// rows, passed only while a Grapher captures, names the parameter slot
	// that holds the count (slot −rows−1), which the kernel reads at run
	// time.
	Launch(k *plan.Kernel, l *plan.Launch, args []Ref, rows int, p *Params) error
	Sync() error
	Close() error
}

// HostBinder is implemented by backends that can use host memory in place:
// the CPU backend maps checkpoint weights without copying them.
type HostBinder interface {
	Bind(data []byte) (Mem, error)
}

// Params is the device-resident parameter block (ir.ParamSlots int32 slots,
// indexed by ir.Slot; floats as their bits): the dynamic values of a step,
// read by kernels at run time so that a captured graph stays valid while
// they change.
type Params [ir.ParamSlots]int32

// Grapher is implemented by backends that can record a sequence of launches
// once and replay it with a single call (the decode step): per-token launch
// overhead goes away. What changes between replays must live in device
// memory — the parameter block, the token buffer — never in launch
// arguments.
type Grapher interface {
	// Capture records the launches fn enqueues, without running them. fn
	// must only launch: no copies, memsets, parameter writes or syncs.
	Capture(fn func() error) (Graph, error)
}

// Graph is a captured launch sequence.
type Graph interface {
	// Replay enqueues the recorded launches; Sync waits for them.
	Replay() error
	// Destroy frees the graph.
	Destroy()
}

// StepGrapher is implemented by backends whose captured graphs can carry a
// step's exchange with the host as well as its launches: the parameter
// block and a small input (the token) copied from pinned host memory as the
// graph's first nodes, a small result (the sampled id and logprob, or the
// logits) copied into pinned host memory as its last. A step is then one
// graph launch that the host does not wait for, and one wait for the result.
type StepGrapher interface {
	// CaptureStep records inBytes bytes copied to in, the parameter block,
	// the launches fn enqueues (fn must only launch, as Capture's), then
	// outBytes bytes copied from out.
	CaptureStep(fn func() error, in Ref, inBytes int64, out Ref, outBytes int64) (StepGraph, error)
}

// StepGraph is a captured step with its pinned host buffers.
type StepGraph interface {
	// Start copies p and in (inBytes long) into the graph's pinned buffers
	// and enqueues one replay; it returns without waiting for the device
	// (after the previous replay's result, which it waits for if Wait was
	// not called, so its buffers are free to refill).
	Start(p *Params, in []byte) error
	// Wait waits for the last Start's replay and copies its result
	// (outBytes long) into dst.
	Wait(dst []byte) error
	// Destroy frees the graph and its pinned buffers.
	Destroy()
}

// UploadJob is one copy of a bulk upload: Src to Dst. Name says what is
// copied (a weight's name) in errors.
type UploadJob struct {
	Name string
	Dst  Ref
	Src  []byte
}

// BulkUploader is implemented by backends that copy many host buffers to
// device memory faster together than with one Upload each: the weights.
type BulkUploader interface {
	// UploadAll copies every job's Src to its Dst, reading the sources in
	// parallel (for a memory-mapped checkpoint, those reads are the page
	// faults of the copies: parallel disk reads). It returns once every
	// source may be reused and the copies are ordered before any later work
	// of the backend. progress, when not nil, is called from one goroutine
	// with the running total of bytes copied, increasing; after a
	// successful UploadAll with bytes to copy its last value is the sum of
	// len(Src). An error names the job that failed and stops the others;
	// the destinations are then undefined.
	UploadAll(jobs []UploadJob, progress func(done int64)) error
}

// StreamForker is implemented by backends that can run two launch
// sequences at once (a second stream joined by events), in a captured
// graph as well as outside one: two independent launches of the decode
// step then overlap instead of queueing behind each other.
type StreamForker interface {
	// Fork enqueues main's launches as usual and side's on a second
	// stream; side's start after everything enqueued before Fork, and
	// everything enqueued after Fork starts after both. Like Capture's fn,
	// main and side must only launch.
	Fork(main, side func() error) error
}

// LaunchAttrs are per-launch hints of the device's extended launch.
type LaunchAttrs struct {
	// ProgrammaticSerialization (programmatic dependent launch, sm_90)
	// lets a launch start while the launch before it on its stream is
	// still running; the kernel waits for that launch's results itself
	// (griddepcontrol.wait) before reading them.
	ProgrammaticSerialization bool
}

// Zero reports whether no attribute is set: a plain launch.
func (a LaunchAttrs) Zero() bool { return a == LaunchAttrs{} }

// AttrLauncher is implemented by backends whose launches can carry
// LaunchAttrs.
type AttrLauncher interface {
	// WithLaunchAttrs runs fn with attrs applied to every launch it makes.
	// A device that cannot honour them says so before fn runs.
	WithLaunchAttrs(attrs LaunchAttrs, fn func() error) error
}

// Residency is a backend that can tell whether a launch's whole grid is
// resident on its device at once, as a family waiting at a grid barrier
// needs (ir.Family.GridBarrier): NewEngine runs the launch's fallback
// (plan.Launch.Fallback) where it is not. A backend without it runs the
// references (the CPU), where any grid is fine.
type Residency interface {
	Resident(k *plan.Kernel, l *plan.Launch) (bool, error)
}
