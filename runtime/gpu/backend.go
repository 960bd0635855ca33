package gpu

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// paramBytes is the size of the parameter block.
const paramBytes = uint64(4 * len(runtime.Params{}))

// Backend is a runtime.Backend on one GPU through a Driver.
type Backend struct {
	mu      sync.Mutex
	d       *Driver
	target  string
	release func() // after Close has freed everything: the context

	stream uintptr // where launches go
	side   uintptr // Fork's second stream
	forked uintptr // event: main reached the fork
	joined uintptr // event: side finished
	// launchOn is the stream launches go to now: stream, or side while
	// Fork runs its side function.
	launchOn uintptr
	pinned   unsafe.Pointer // runtime.PackArgs' block, then the launch configuration
	block    uint64         // device: the parameter block (runtime.Params)

	capturing bool // launches are being recorded into a graph
	captured  int  // launches recorded so far in this capture
	forking   bool // Fork is running
	attrs     runtime.LaunchAttrs

	objects map[string][]byte
	modules []uintptr
	// multiprocessors is Config.Multiprocessors.
	multiprocessors int
	funcs           map[string]*function
	mems            map[*mem]struct{}   // live allocations, freed by Close
	graphs          map[*graph]struct{} // live graphs, destroyed by Close
	last            string              // the kernel launched last, named in asynchronous errors
	closed          bool

	// uploads is held shared by UploadAll and exclusively by Close, which
	// first sets closing so that the workers stop.
	uploads sync.RWMutex
	closing atomic.Bool
	chunk   int64 // SetUploadChunk

	errClosed, errCapturing error
}

// function is a loaded kernel entry point.
type function struct {
	fn     uintptr
	shared int // the dynamic shared memory limit raised so far (FuncSetAttribute)
}

// mem is device memory of one backend.
type mem struct {
	b    *Backend
	ptr  uint64
	size int64
}

func (m *mem) Size() int64 { return m.size }

var (
	_ runtime.Backend      = (*Backend)(nil)
	_ runtime.Grapher      = (*Backend)(nil)
	_ runtime.BulkUploader = (*Backend)(nil)
	_ runtime.StreamForker = (*Backend)(nil)
	_ runtime.AttrLauncher = (*Backend)(nil)
	_ runtime.Residency    = (*Backend)(nil)
)

// Config is what a binding tells New besides its driver.
type Config struct {
	// Target is the plan target the backend runs (runtime.Backend.Name).
	Target string
	// Objects maps each plan kernel's name to its code object; Load checks
	// that the plan's kernels are all there.
	Objects map[string][]byte
	// Release, when set, is called once by Close after everything the
	// backend holds is freed (the CUDA primary context).
	Release func()
	// Multiprocessors is the device's SM or CU count (0: unknown, and then
	// no grid counts as resident: Resident).
	Multiprocessors int
}

// New opens a backend on a device the driver has made current: the main
// and second streams with their fork and join events, the pinned argument
// block and the device parameter block (zeroed). On an error, what it made
// is freed again (Release is not called).
func New(d *Driver, cfg Config) (*Backend, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	b := &Backend{d: d, target: cfg.Target, release: cfg.Release, objects: cfg.Objects, multiprocessors: cfg.Multiprocessors,
		funcs: map[string]*function{}, mems: map[*mem]struct{}{}, graphs: map[*graph]struct{}{},
		errClosed:    fmt.Errorf("%s: backend is closed", d.Dialect),
		errCapturing: fmt.Errorf("%s: only launches are allowed during graph capture", d.Dialect)}
	unlock := b.enter()
	defer unlock()
	steps := []struct {
		call string
		do   func() int32
		undo func()
	}{
		{"make the device current", d.MakeCurrent, func() {}},
		{"create the stream", func() int32 { return d.StreamCreate(&b.stream, streamDefault) }, func() { d.StreamDestroy(b.stream) }},
		{"create the second stream", func() int32 { return d.StreamCreate(&b.side, streamDefault) }, func() { d.StreamDestroy(b.side) }},
		{"create the fork event", func() int32 { return d.EventCreate(&b.forked, eventDisableTiming) }, func() { d.EventDestroy(b.forked) }},
		{"create the join event", func() int32 { return d.EventCreate(&b.joined, eventDisableTiming) }, func() { d.EventDestroy(b.joined) }},
		{"pin the argument block", func() int32 { return d.HostAlloc(&b.pinned, pinnedBytes, 0) }, func() { d.HostFree(b.pinned) }},
		{"allocate the parameter block", func() int32 { return d.MemAlloc(&b.block, paramBytes) }, func() { d.MemFree(b.block) }},
		{"clear the parameter block", func() int32 { return d.MemsetD8(b.block, 0, paramBytes) }, func() {}},
	}
	for i, s := range steps {
		if rc := s.do(); rc != 0 {
			for k := i - 1; k >= 0; k-- {
				steps[k].undo()
			}
			return nil, b.fail(s.call, rc)
		}
	}
	b.launchOn = b.stream
	return b, nil
}

// enter pins the goroutine to its OS thread, makes the device current there
// and holds the backend's lock; the caller runs the returned function when
// done.
func (b *Backend) enter() func() {
	b.mu.Lock()
	goruntime.LockOSThread()
	if !b.closed {
		b.d.MakeCurrent()
	}
	return func() {
		goruntime.UnlockOSThread()
		b.mu.Unlock()
	}
}

// fail is the error of a driver call.
func (b *Backend) fail(what string, rc int32) error {
	return fmt.Errorf("%s: %s: %s", b.d.Dialect, what, b.d.ErrorText(rc))
}

// async names an error that may come from earlier, asynchronous work: the
// kernel launched last is the first suspect.
func (b *Backend) async(what string, rc int32) error {
	if b.last != "" {
		return b.fail(what+" (after launching "+b.last+")", rc)
	}
	return b.fail(what, rc)
}

// Name is the plan target.
func (b *Backend) Name() string { return b.target }

// ready refuses work on a closed backend, and, with copies, during capture.
func (b *Backend) ready(copies bool) error {
	if b.closed {
		return b.errClosed
	}
	if copies && b.capturing {
		return b.errCapturing
	}
	return nil
}

// MemInfo is the device's free and total memory in bytes.
func (b *Backend) MemInfo() (free, total uint64, err error) {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return 0, 0, err
	}
	if rc := b.d.MemGetInfo(&free, &total); rc != 0 {
		return 0, 0, b.fail("memory info", rc)
	}
	return free, total, nil
}

// Alloc allocates device memory (256-byte aligned by the driver).
func (b *Backend) Alloc(n int64) (runtime.Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("%s: cannot allocate %d bytes", b.d.Dialect, n)
	}
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return nil, err
	}
	m := &mem{b: b, size: n}
	if rc := b.d.MemAlloc(&m.ptr, uint64(max(n, 1))); rc != 0 {
		return nil, b.fail(fmt.Sprintf("allocate %d bytes", n), rc)
	}
	b.mems[m] = struct{}{}
	return m, nil
}

// Free frees memory from Alloc; twice, or after Close, is harmless.
func (b *Backend) Free(m runtime.Mem) {
	dm, ok := m.(*mem)
	if !ok || dm.b != b || dm.ptr == 0 {
		return
	}
	unlock := b.enter()
	defer unlock()
	if _, live := b.mems[dm]; live && !b.closed {
		b.d.MemFree(dm.ptr)
		delete(b.mems, dm)
	}
	dm.ptr = 0
}

// device resolves a Ref to a device address with n bytes available.
func (b *Backend) device(r runtime.Ref, n int64) (uint64, error) {
	m, ok := r.Mem.(*mem)
	if !ok || m.b != b {
		return 0, fmt.Errorf("%s: memory from another backend", b.d.Dialect)
	}
	if m.ptr == 0 {
		if b.closing.Load() {
			return 0, b.errClosed
		}
		return 0, fmt.Errorf("%s: memory used after Free", b.d.Dialect)
	}
	if r.Offset < 0 || n < 0 || r.Offset+n > m.size {
		return 0, fmt.Errorf("%s: %d bytes at offset %d overrun a %d-byte buffer", b.d.Dialect, n, r.Offset, m.size)
	}
	return m.ptr + uint64(r.Offset), nil
}

// Upload copies host bytes to the device; it returns once src may be reused.
func (b *Backend) Upload(dst runtime.Ref, src []byte) error {
	p, err := b.device(dst, int64(len(src)))
	if err != nil || len(src) == 0 {
		return err
	}
	err = b.transfer("upload", func() int32 { return b.d.MemcpyHtoD(p, unsafe.Pointer(&src[0]), uint64(len(src))) })
	goruntime.KeepAlive(src)
	return err
}

// transfer runs a copy or memset, refused on a closed backend and during
// capture; its error may come from earlier work (async).
func (b *Backend) transfer(what string, op func() int32) error {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return err
	}
	if rc := op(); rc != 0 {
		return b.async(what, rc)
	}
	return nil
}

// Download copies device bytes to the host after all launched work.
func (b *Backend) Download(dst []byte, src runtime.Ref) error {
	p, err := b.device(src, int64(len(dst)))
	if err != nil || len(dst) == 0 {
		return err
	}
	err = b.transfer("download", func() int32 { return b.d.MemcpyDtoH(unsafe.Pointer(&dst[0]), p, uint64(len(dst))) })
	goruntime.KeepAlive(dst)
	return err
}

// Copy copies n bytes between device buffers, in order on the backend's
// stream: after the launches enqueued before it, before those after.
func (b *Backend) Copy(dst, src runtime.Ref, n int64) error {
	d, err := b.device(dst, n)
	if err != nil {
		return err
	}
	s, err := b.device(src, n)
	if err != nil || n == 0 {
		return err
	}
	return b.transfer("device copy", func() int32 { return b.d.MemcpyDtoDAsync(d, s, uint64(n), b.stream) })
}

// Zero clears n bytes at dst.
func (b *Backend) Zero(dst runtime.Ref, n int64) error {
	p, err := b.device(dst, n)
	if err != nil || n == 0 {
		return err
	}
	return b.transfer("memset", func() int32 { return b.d.MemsetD8(p, 0, uint64(n)) })
}

// Load loads the code object of every plan kernel as a module and looks up
// its entry point (named after the kernel). Kernels already loaded are
// kept; the images stay referenced until Close.
func (b *Backend) Load(ks []plan.Kernel) error {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	var missing []string
	for _, k := range ks {
		if _, ok := b.objects[k.Name]; !ok {
			missing = append(missing, k.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: no code object for %d of the plan's %d kernels: %v", b.d.Dialect, len(missing), len(ks), missing)
	}
	for _, k := range ks {
		if _, ok := b.funcs[k.Name]; ok {
			continue
		}
		if _, err := runtime.KernelFamily(&k); err != nil {
			return fmt.Errorf("%s: kernel %s: unknown family %q", b.d.Dialect, k.Name, k.Family)
		}
		image := b.objects[k.Name]
		if len(image) == 0 {
			return fmt.Errorf("%s: kernel %s: empty code object", b.d.Dialect, k.Name)
		}
		var mod, fn uintptr
		if rc := b.d.ModuleLoadData(&mod, unsafe.Pointer(&image[0])); rc != 0 {
			return b.fail("kernel "+k.Name+": module load", rc)
		}
		b.modules = append(b.modules, mod)
		if rc := b.d.ModuleGetFunction(&fn, mod, k.Name); rc != 0 {
			return b.fail("kernel "+k.Name+": function lookup", rc)
		}
		b.funcs[k.Name] = &function{fn: fn}
	}
	return nil
}

// Resident reports whether launch l's whole grid of kernel k (loaded) is
// resident on the device at once: the blocks the driver's occupancy query
// says one multiprocessor holds, times the multiprocessors, at least the
// grid's blocks. Without the query or the multiprocessor count it says
// no, so the engine takes the launch's fallback.
func (b *Backend) Resident(k *plan.Kernel, l *plan.Launch) (bool, error) {
	grid, block, err := runtime.LaunchShape(l)
	if err != nil {
		return false, fmt.Errorf("%s: kernel %s: %w", b.d.Dialect, k.Name, err)
	}
	n, err := b.ResidentBlocks(k, int(block[0]*block[1]*block[2]), l.SharedBytes)
	if err != nil || n <= 0 {
		return false, err
	}
	return int64(n) >= int64(grid[0])*int64(grid[1])*int64(grid[2]), nil
}

// SetParams writes the parameter block. The copy is synchronous and ordered
// after every launch already enqueued (the stream is a blocking one), so
// kernels enqueued earlier still see the values they were launched with.
func (b *Backend) SetParams(p *runtime.Params) error {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	if b.capturing {
		return fmt.Errorf("%s: parameter block written during graph capture", b.d.Dialect)
	}
	if rc := b.d.MemcpyHtoD(b.block, unsafe.Pointer(&p[0]), paramBytes); rc != 0 {
		return b.async("parameter block upload", rc)
	}
	goruntime.KeepAlive(p)
	return nil
}

// Sync waits for every launch; an error from a kernel names the last one.
func (b *Backend) Sync() error {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return err
	}
	if rc := b.d.StreamSynchronize(b.stream); rc != 0 {
		return b.async("synchronize", rc)
	}
	return nil
}

// Close waits for outstanding work (an UploadAll in progress stops first)
// and releases everything the backend holds: graphs, modules, memory not
// freed yet, the parameter and argument blocks, the events and streams,
// then the context. Memory from Alloc is unusable afterwards; a second
// Close does nothing, and every other call returns an error.
func (b *Backend) Close() error {
	b.closing.Store(true)
	b.uploads.Lock()
	defer b.uploads.Unlock()
	unlock := b.enter()
	defer unlock()
	if b.closed {
		return nil
	}
	var errs []error
	if rc := b.d.StreamSynchronize(b.stream); rc != 0 {
		errs = append(errs, b.async("synchronize", rc))
	}
	d := b.d
	for g := range b.graphs {
		g.destroy()
	}
	for _, m := range b.modules {
		d.ModuleUnload(m)
	}
	b.modules, b.funcs, b.objects = nil, nil, nil
	for m := range b.mems {
		d.MemFree(m.ptr)
		m.ptr = 0
	}
	b.mems = nil
	d.HostFree(b.pinned)
	d.MemFree(b.block)
	d.EventDestroy(b.forked)
	d.EventDestroy(b.joined)
	d.StreamDestroy(b.side)
	d.StreamDestroy(b.stream)
	b.pinned, b.block, b.forked, b.joined, b.side, b.stream, b.launchOn = nil, 0, 0, 0, 0, 0, 0
	b.closed = true
	if b.release != nil {
		b.release()
	}
	return errors.Join(errs...)
}
