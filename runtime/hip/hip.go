// Package hip is the gfx1151 backend of the runtime: device memory, copies,
// kernel launches and graph capture through the HIP runtime API, on one AMD
// GPU of the RDNA 3 family (gfx11xx; the plans target gfx1151, RDNA 3.5).
// It follows the design of the sm_90 backend (package runtime/cuda).
//
// # Why purego
//
// The HIP runtime library (libamdhip64.so, see LibraryNames) is loaded at
// run time with github.com/ebitengine/purego: no cgo, no ROCm headers or
// toolkit at build time, one binary for every machine. Importing the
// package needs nothing; only New (or Open) needs the library. Kernels come
// as code objects (.hsaco) compiled ahead of time, kernel name → bytes (a
// bundle's Objects), so the runtime never runs a compiler.
//
// # Kernel ABI
//
// Every kernel takes, in order (codegen's ABI): one device pointer per
// operand of its family's ir.Catalogue signature, 16-byte aligned; int n,
// the launch's row count; and const int* params, the device address of the
// parameter block (runtime.Params), which holds the dynamic values (the
// position, the sampling settings) so that a captured graph stays valid
// while they change. Argument values and the kernelParams pointer array
// live in pinned host memory allocated once (hipHostMalloc): no Go memory
// is handed to hipModuleLaunchKernel, which copies the values when it
// enqueues the launch.
//
// Every launch goes on one blocking stream; uploads, downloads and memsets
// are synchronous copies on the legacy null stream, which a blocking stream
// is ordered with, so the engine sees the same sequential semantics as on
// the CPU. SetParams is such a copy: launches enqueued before it read the
// old values, launches after it the new ones.
//
// # Tests
//
// No AMD GPU is needed to test the package: testdata/fakehip.c implements
// every entry point the backend binds over host memory, with the real C
// signatures and enum values. The tests compile it into a shared object
// with the first C compiler on PATH and load it through Open, the same
// binding a real runtime goes through. The fake cannot compute; it checks
// pointers, bounds and handles, and logs every launch — kernel, grid,
// block, each argument, and the parameter block as the launch reads it —
// so the tests see exactly what a GPU would be asked to run, including what
// a replayed graph reads after new SetParams values, and it can make any
// entry point fail on demand to exercise the error paths.
package hip

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// Target is the plan target this backend runs.
const Target = "gfx1151"

// paramBytes is the size of the parameter block.
const paramBytes = 4 * len(runtime.Params{})

// HIP is a runtime.Backend on one AMD GPU (device 0).
type HIP struct {
	mu     sync.Mutex
	lib    *Library
	a      *api
	dev    int32
	stream uintptr
	params unsafe.Pointer // pinned: runtime.PackArgs' block
	block  uintptr        // device: the parameter block (runtime.Params)

	capturing bool // launches are being recorded into a graph
	captured  int  // launches recorded so far in this capture

	objects map[string][]byte // kept referenced until Close
	modules []uintptr
	funcs   map[string]uintptr
	mems    map[*mem]struct{}   // live allocations, freed by Close
	graphs  map[*graph]struct{} // live graphs, destroyed by Close
	last    string              // the kernel launched last, named in asynchronous errors
	closed  bool

	device string
	cc     [2]int32
}

// mem is device memory.
type mem struct {
	ptr  uintptr
	size int64
}

func (m *mem) Size() int64 { return m.size }

var _ runtime.Backend = (*HIP)(nil)

// New opens device 0 of the default HIP runtime library (see Default).
// objects maps each plan kernel's name to its gfx1151 code object; Load
// checks that the plan's kernels are all there.
func New(objects map[string][]byte) (*HIP, error) {
	l, err := Default()
	if err != nil {
		return nil, err
	}
	return l.New(objects)
}

// New opens device 0 of the library with a stream, the pinned argument
// block and the device parameter block (zeroed). A device that is not a
// gfx11 GPU is refused.
func (l *Library) New(objects map[string][]byte) (*HIP, error) {
	h := &HIP{lib: l, a: &l.api, objects: objects, funcs: map[string]uintptr{},
		mems: map[*mem]struct{}{}, graphs: map[*graph]struct{}{}}
	a := h.a
	var count int32
	if rc := a.hipGetDeviceCount(&count); rc != 0 || count == 0 {
		if rc == 0 {
			return nil, errors.New("hip: no HIP device")
		}
		return nil, h.fail("hipGetDeviceCount", rc)
	}
	if rc := a.hipSetDevice(h.dev); rc != 0 {
		return nil, h.fail("hipSetDevice", rc)
	}
	unlock := h.enter()
	defer unlock()
	var name [256]byte
	if rc := a.hipDeviceGetName(&name[0], int32(len(name)), h.dev); rc != 0 {
		return nil, h.fail("hipDeviceGetName", rc)
	}
	h.device = cString(name[:])
	for i, attr := range []int32{attrComputeMajor, attrComputeMinor} {
		if rc := a.hipDeviceGetAttribute(&h.cc[i], attr, h.dev); rc != 0 {
			return nil, h.fail("hipDeviceGetAttribute", rc)
		}
	}
	if h.cc[0] != 11 {
		return nil, fmt.Errorf("hip: %s reports compute capability %d.%d, not a gfx11 GPU; gfx1151 code objects need gfx11xx (11.x)", h.device, h.cc[0], h.cc[1])
	}
	if rc := a.hipStreamCreate(&h.stream); rc != 0 {
		return nil, h.fail("hipStreamCreate", rc)
	}
	if rc := a.hipHostMalloc(&h.params, 2*8*runtime.MaxKernelArgs, hostMallocDefault); rc != 0 {
		a.hipStreamDestroy(h.stream)
		return nil, h.fail("hipHostMalloc", rc)
	}
	if rc := a.hipMalloc(&h.block, uintptr(paramBytes)); rc != 0 {
		a.hipHostFree(h.params)
		a.hipStreamDestroy(h.stream)
		return nil, h.fail("hipMalloc", rc)
	}
	if rc := a.hipMemset(h.block, 0, uintptr(paramBytes)); rc != 0 {
		a.hipFree(h.block)
		a.hipHostFree(h.params)
		a.hipStreamDestroy(h.stream)
		return nil, h.fail("hipMemset", rc)
	}
	return h, nil
}

// Device names the GPU, its compute capability and the runtime, e.g.
// "AMD Radeon 8060S Graphics (11.5, HIP 6.4.43483)".
func (h *HIP) Device() string {
	return fmt.Sprintf("%s (%d.%d, HIP %s)", h.device, h.cc[0], h.cc[1], h.lib.Version())
}

// enter pins the goroutine to its OS thread and makes the device current
// there (the runtime's current device is per thread); the caller runs the
// returned function when done.
func (h *HIP) enter() func() {
	h.mu.Lock()
	goruntime.LockOSThread()
	h.a.hipSetDevice(h.dev)
	return func() {
		goruntime.UnlockOSThread()
		h.mu.Unlock()
	}
}

func (h *HIP) fail(call string, rc int32) error {
	return fmt.Errorf("hip: %s: %s", call, h.a.errorString(rc))
}

func (*HIP) Name() string { return Target }

var (
	errClosed    = errors.New("hip: backend is closed")
	errCapturing = errors.New("hip: only launches are allowed during graph capture")
)

// Alloc allocates device memory (256-byte aligned by the runtime).
func (h *HIP) Alloc(n int64) (runtime.Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("hip: cannot allocate %d bytes", n)
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return nil, errClosed
	}
	m := &mem{size: n}
	if rc := h.a.hipMalloc(&m.ptr, uintptr(max(n, 1))); rc != 0 {
		return nil, fmt.Errorf("hip: allocate %d bytes: %s", n, h.a.errorString(rc))
	}
	h.mems[m] = struct{}{}
	return m, nil
}

func (h *HIP) Free(m runtime.Mem) {
	dm, ok := m.(*mem)
	if !ok || dm.ptr == 0 {
		return
	}
	unlock := h.enter()
	defer unlock()
	if _, live := h.mems[dm]; live && !h.closed {
		h.a.hipFree(dm.ptr)
		delete(h.mems, dm)
	}
	dm.ptr = 0
}

// device resolves a Ref to a device address with n bytes available.
func device(r runtime.Ref, n int64) (uintptr, error) {
	m, ok := r.Mem.(*mem)
	if !ok {
		return 0, errors.New("hip: memory from another backend")
	}
	if m.ptr == 0 {
		return 0, errors.New("hip: memory used after Free")
	}
	if r.Offset < 0 || n < 0 || r.Offset+n > m.size {
		return 0, fmt.Errorf("hip: %d bytes at offset %d overrun a %d-byte buffer", n, r.Offset, m.size)
	}
	return m.ptr + uintptr(r.Offset), nil
}

// Upload copies host bytes to the device; it returns once src may be reused.
func (h *HIP) Upload(dst runtime.Ref, src []byte) error {
	p, err := device(dst, int64(len(src)))
	if err != nil || len(src) == 0 {
		return err
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if h.capturing {
		return errCapturing
	}
	if rc := h.a.hipMemcpyHtoD(p, unsafe.Pointer(&src[0]), uintptr(len(src))); rc != 0 {
		return h.async("upload", rc)
	}
	goruntime.KeepAlive(src)
	return nil
}

// Download copies device bytes to the host after all launched work.
func (h *HIP) Download(dst []byte, src runtime.Ref) error {
	p, err := device(src, int64(len(dst)))
	if err != nil || len(dst) == 0 {
		return err
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if h.capturing {
		return errCapturing
	}
	if rc := h.a.hipMemcpyDtoH(unsafe.Pointer(&dst[0]), p, uintptr(len(dst))); rc != 0 {
		return h.async("download", rc)
	}
	goruntime.KeepAlive(dst)
	return nil
}

// Zero clears n bytes at dst.
func (h *HIP) Zero(dst runtime.Ref, n int64) error {
	p, err := device(dst, n)
	if err != nil || n == 0 {
		return err
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if h.capturing {
		return errCapturing
	}
	if rc := h.a.hipMemset(p, 0, uintptr(n)); rc != 0 {
		return h.async("memset", rc)
	}
	return nil
}

// async names an error that may come from earlier, asynchronous work: the
// kernel launched last is the first suspect.
func (h *HIP) async(what string, rc int32) error {
	if h.last != "" {
		return fmt.Errorf("hip: %s (after launching %s): %s", what, h.last, h.a.errorString(rc))
	}
	return fmt.Errorf("hip: %s: %s", what, h.a.errorString(rc))
}

// Load loads the code object of every plan kernel as a module and looks up
// its entry point (named after the kernel). Kernels already loaded are
// kept. The images stay referenced by the backend until Close.
func (h *HIP) Load(ks []plan.Kernel) error {
	var missing []string
	for _, k := range ks {
		if _, ok := h.objects[k.Name]; !ok {
			missing = append(missing, k.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("hip: no code object for %d of the plan's %d kernels: %v", len(missing), len(ks), missing)
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	for _, k := range ks {
		if _, ok := h.funcs[k.Name]; ok {
			continue
		}
		if _, err := kernels.Families.Family(ir.Kind(k.Family)); err != nil {
			return fmt.Errorf("hip: kernel %s: unknown family %q", k.Name, k.Family)
		}
		image := h.objects[k.Name]
		if len(image) == 0 {
			return fmt.Errorf("hip: kernel %s: empty code object", k.Name)
		}
		var mod, fn uintptr
		if rc := h.a.hipModuleLoadData(&mod, unsafe.Pointer(&image[0])); rc != 0 {
			return fmt.Errorf("hip: kernel %s: hipModuleLoadData: %s", k.Name, h.a.errorString(rc))
		}
		h.modules = append(h.modules, mod)
		if rc := h.a.hipModuleGetFunction(&fn, mod, k.Name); rc != 0 {
			return fmt.Errorf("hip: kernel %s: hipModuleGetFunction: %s", k.Name, h.a.errorString(rc))
		}
		h.funcs[k.Name] = fn
	}
	return nil
}

// Launch enqueues one kernel: a device pointer per operand (in catalogue
// order), then n = rows, then the parameter block's device address. The
// dynamic values come from the device block (SetParams), not from p.
func (h *HIP) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, _ *runtime.Params) error {
	vals, err := runtime.KernelArgs(k, args, rows, uint64(h.block), func(r runtime.Ref) (uint64, error) {
		p, err := device(r, 0)
		return uint64(p), err
	})
	if err != nil {
		return fmt.Errorf("hip: %w", err)
	}
	grid, block, err := runtime.LaunchShape(l)
	if err != nil {
		return fmt.Errorf("hip: kernel %s: %w", k.Name, err)
	}
	if rows <= 0 {
		return nil
	}
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	fn, ok := h.funcs[k.Name]
	if !ok {
		return fmt.Errorf("hip: kernel %s was not loaded", k.Name)
	}
	// The runtime copies the values when the launch is enqueued.
	ptrs := runtime.PackArgs(h.params, vals)
	rc := h.a.hipModuleLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
		uint32(l.SharedBytes), h.stream, ptrs, nil)
	h.last = k.Name
	if h.capturing {
		h.captured++
	}
	if rc != 0 {
		return fmt.Errorf("hip: launch %s (grid %v, block %v): %s", k.Name, grid, block, h.a.errorString(rc))
	}
	return nil
}

// SetParams writes the parameter block. The copy is synchronous and ordered
// after every launch already enqueued (the stream is a blocking one), so
// kernels enqueued earlier still see the values they were launched with.
func (h *HIP) SetParams(p *runtime.Params) error {
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if h.capturing {
		return errors.New("hip: parameter block written during graph capture")
	}
	if rc := h.a.hipMemcpyHtoD(h.block, unsafe.Pointer(&p[0]), uintptr(paramBytes)); rc != 0 {
		return h.async("parameter block upload", rc)
	}
	goruntime.KeepAlive(p)
	return nil
}

// Sync waits for every launch; an error from a kernel names the last one.
func (h *HIP) Sync() error {
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return errClosed
	}
	if h.capturing {
		return errCapturing
	}
	if rc := h.a.hipStreamSynchronize(h.stream); rc != 0 {
		return h.async("synchronize", rc)
	}
	return nil
}

// Close waits for outstanding work and releases everything the backend
// holds: graphs, modules, memory not freed yet, the parameter and argument
// blocks and the stream. Memory from Alloc is unusable afterwards.
func (h *HIP) Close() error {
	unlock := h.enter()
	defer unlock()
	if h.closed {
		return nil
	}
	var errs []error
	if rc := h.a.hipStreamSynchronize(h.stream); rc != 0 {
		errs = append(errs, h.async("synchronize", rc))
	}
	for g := range h.graphs {
		g.destroy()
	}
	for _, m := range h.modules {
		h.a.hipModuleUnload(m)
	}
	h.modules, h.funcs, h.objects = nil, nil, nil
	for m := range h.mems {
		h.a.hipFree(m.ptr)
		m.ptr = 0
	}
	h.mems = nil
	h.a.hipHostFree(h.params)
	h.params = nil
	h.a.hipFree(h.block)
	h.block = 0
	h.a.hipStreamDestroy(h.stream)
	h.stream = 0
	h.closed = true
	return errors.Join(errs...)
}
