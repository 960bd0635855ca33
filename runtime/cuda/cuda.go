// Package cuda is the sm_90 backend of the runtime: device memory, copies
// and kernel launches through the CUDA driver API, loaded at run time from
// libcuda.so.1 with purego (no cgo, no CUDA toolkit). Kernels come as cubins
// compiled ahead of time (kernel name → code object), so the runtime never
// runs a compiler; importing the package needs no driver, only NewCUDA does.
//
// Every launch goes on one stream; uploads, downloads and memsets use the
// legacy default stream, which the backend's blocking stream is ordered
// with, so the engine sees the same sequential semantics as on the CPU.
// Kernel argument values and the kernelParams pointer array live in pinned
// host memory allocated once by the driver: no Go memory is handed to
// cuLaunchKernel.
package cuda

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
const Target = "sm_90"

// Device attributes read at start (CUdevice_attribute).
const (
	attrComputeMajor = 75
	attrComputeMinor = 76
)

// CUDA is a runtime.Backend on one NVIDIA GPU (device 0).
type CUDA struct {
	mu     sync.Mutex
	d      *driver
	dev    int32
	ctx    uintptr
	stream uintptr
	params unsafe.Pointer // pinned: runtime.PackArgs' block
	block  uint64         // device: the parameter block (runtime.Params)

	capturing bool // launches are being recorded into a graph
	captured  int  // launches recorded so far in this capture

	cubins  map[string][]byte
	modules []uintptr
	funcs   map[string]uintptr
	last    string // the kernel launched last, named in asynchronous errors
	closed  bool

	device string
	cc     [2]int32
}

// mem is device memory.
type mem struct {
	ptr  uint64
	size int64
}

func (m *mem) Size() int64 { return m.size }

var _ runtime.Backend = (*CUDA)(nil)

// NewCUDA opens device 0 with its primary context and a stream. cubins
// maps each plan kernel's name to its sm_90 code object; Load checks that
// the plan's kernels are all there.
func NewCUDA(cubins map[string][]byte) (*CUDA, error) {
	d, err := load()
	if err != nil {
		return nil, err
	}
	c := &CUDA{d: d, cubins: cubins, funcs: map[string]uintptr{}}
	if rc := d.cuDeviceGet(&c.dev, 0); rc != 0 {
		return nil, c.fail("cuDeviceGet", rc)
	}
	var name [256]byte
	if rc := d.cuDeviceGetName(&name[0], int32(len(name)), c.dev); rc != 0 {
		return nil, c.fail("cuDeviceGetName", rc)
	}
	c.device = cString(unsafe.Pointer(&name[0]))
	for i, attr := range []int32{attrComputeMajor, attrComputeMinor} {
		if rc := d.cuDeviceGetAttribute(&c.cc[i], attr, c.dev); rc != 0 {
			return nil, c.fail("cuDeviceGetAttribute", rc)
		}
	}
	if c.cc[0] != 9 {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; sm_90 code needs 9.x", c.device, c.cc[0], c.cc[1])
	}
	if rc := d.cuDevicePrimaryCtxRetain(&c.ctx, c.dev); rc != 0 {
		return nil, c.fail("cuDevicePrimaryCtxRetain", rc)
	}
	unlock := c.enter()
	defer unlock()
	if rc := d.cuCtxSetCurrent(c.ctx); rc != 0 {
		d.cuDevicePrimaryCtxRelease(c.dev)
		return nil, c.fail("cuCtxSetCurrent", rc)
	}
	if rc := d.cuStreamCreate(&c.stream, 0); rc != 0 {
		d.cuDevicePrimaryCtxRelease(c.dev)
		return nil, c.fail("cuStreamCreate", rc)
	}
	if rc := d.cuMemAllocHost(&c.params, 2*8*runtime.MaxKernelArgs); rc != 0 {
		d.cuStreamDestroy(c.stream)
		d.cuDevicePrimaryCtxRelease(c.dev)
		return nil, c.fail("cuMemAllocHost", rc)
	}
	if rc := d.cuMemAlloc(&c.block, uint64(4*len(runtime.Params{}))); rc != 0 {
		d.cuMemFreeHost(c.params)
		d.cuStreamDestroy(c.stream)
		d.cuDevicePrimaryCtxRelease(c.dev)
		return nil, c.fail("cuMemAlloc", rc)
	}
	if rc := d.cuMemsetD8(c.block, 0, uint64(4*len(runtime.Params{}))); rc != 0 {
		d.cuMemFree(c.block)
		d.cuMemFreeHost(c.params)
		d.cuStreamDestroy(c.stream)
		d.cuDevicePrimaryCtxRelease(c.dev)
		return nil, c.fail("cuMemsetD8", rc)
	}
	return c, nil
}

// Device names the GPU and its compute capability, e.g. "NVIDIA H200 (sm_90)".
func (c *CUDA) Device() string { return fmt.Sprintf("%s (sm_%d%d)", c.device, c.cc[0], c.cc[1]) }

// enter pins the goroutine to its OS thread and makes the context current
// there (the driver's current context is per thread); the caller runs the
// returned function when done.
func (c *CUDA) enter() func() {
	c.mu.Lock()
	goruntime.LockOSThread()
	if c.ctx != 0 {
		c.d.cuCtxSetCurrent(c.ctx)
	}
	return func() {
		goruntime.UnlockOSThread()
		c.mu.Unlock()
	}
}

func (c *CUDA) fail(call string, rc int32) error {
	return fmt.Errorf("cuda: %s: %s", call, c.d.errorString(rc))
}

func (*CUDA) Name() string { return Target }

// Alloc allocates device memory (256-byte aligned by the driver).
func (c *CUDA) Alloc(n int64) (runtime.Mem, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: cannot allocate %d bytes", n)
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return nil, errClosed
	}
	m := &mem{size: n}
	if rc := c.d.cuMemAlloc(&m.ptr, uint64(max(n, 1))); rc != 0 {
		return nil, fmt.Errorf("cuda: allocate %d bytes: %s", n, c.d.errorString(rc))
	}
	return m, nil
}

var (
	errClosed    = errors.New("cuda: backend is closed")
	errCapturing = errors.New("cuda: only launches are allowed during graph capture")
)

func (c *CUDA) Free(m runtime.Mem) {
	dm, ok := m.(*mem)
	if !ok || dm.ptr == 0 {
		return
	}
	unlock := c.enter()
	defer unlock()
	if !c.closed {
		c.d.cuMemFree(dm.ptr)
	}
	dm.ptr = 0
}

// device resolves a Ref to a device address with n bytes available.
func device(r runtime.Ref, n int64) (uint64, error) {
	m, ok := r.Mem.(*mem)
	if !ok {
		return 0, errors.New("cuda: memory from another backend")
	}
	if m.ptr == 0 {
		return 0, errors.New("cuda: memory used after Free")
	}
	if r.Offset < 0 || n < 0 || r.Offset+n > m.size {
		return 0, fmt.Errorf("cuda: %d bytes at offset %d overrun a %d-byte buffer", n, r.Offset, m.size)
	}
	return m.ptr + uint64(r.Offset), nil
}

// Upload copies host bytes to the device; it returns once src may be reused.
func (c *CUDA) Upload(dst runtime.Ref, src []byte) error {
	p, err := device(dst, int64(len(src)))
	if err != nil || len(src) == 0 {
		return err
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if c.capturing {
		return errCapturing
	}
	if rc := c.d.cuMemcpyHtoD(p, unsafe.Pointer(&src[0]), uint64(len(src))); rc != 0 {
		return c.async("upload", rc)
	}
	goruntime.KeepAlive(src)
	return nil
}

// Download copies device bytes to the host after all launched work.
func (c *CUDA) Download(dst []byte, src runtime.Ref) error {
	p, err := device(src, int64(len(dst)))
	if err != nil || len(dst) == 0 {
		return err
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if c.capturing {
		return errCapturing
	}
	if rc := c.d.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), p, uint64(len(dst))); rc != 0 {
		return c.async("download", rc)
	}
	goruntime.KeepAlive(dst)
	return nil
}

// Zero clears n bytes at dst.
func (c *CUDA) Zero(dst runtime.Ref, n int64) error {
	p, err := device(dst, n)
	if err != nil || n == 0 {
		return err
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if c.capturing {
		return errCapturing
	}
	if rc := c.d.cuMemsetD8(p, 0, uint64(n)); rc != 0 {
		return c.async("memset", rc)
	}
	return nil
}

// async names an error that may come from earlier, asynchronous work: the
// kernel launched last is the first suspect.
func (c *CUDA) async(what string, rc int32) error {
	if c.last != "" {
		return fmt.Errorf("cuda: %s (after launching %s): %s", what, c.last, c.d.errorString(rc))
	}
	return fmt.Errorf("cuda: %s: %s", what, c.d.errorString(rc))
}

// Load loads the cubin of every plan kernel as a module and looks up its
// entry point (named after the kernel). Kernels already loaded are kept.
func (c *CUDA) Load(ks []plan.Kernel) error {
	var missing []string
	for _, k := range ks {
		if _, ok := c.cubins[k.Name]; !ok {
			missing = append(missing, k.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cuda: no cubin for %d of the plan's %d kernels: %v", len(missing), len(ks), missing)
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	for _, k := range ks {
		if _, ok := c.funcs[k.Name]; ok {
			continue
		}
		if _, err := kernels.Families.Family(ir.Kind(k.Family)); err != nil {
			return fmt.Errorf("cuda: kernel %s: unknown family %q", k.Name, k.Family)
		}
		image := c.cubins[k.Name]
		if len(image) == 0 {
			return fmt.Errorf("cuda: kernel %s: empty cubin", k.Name)
		}
		var mod, fn uintptr
		if rc := c.d.cuModuleLoadData(&mod, unsafe.Pointer(&image[0])); rc != 0 {
			return fmt.Errorf("cuda: kernel %s: cuModuleLoadData: %s", k.Name, c.d.errorString(rc))
		}
		goruntime.KeepAlive(image)
		c.modules = append(c.modules, mod)
		if rc := c.d.cuModuleGetFunction(&fn, mod, k.Name); rc != 0 {
			return fmt.Errorf("cuda: kernel %s: cuModuleGetFunction: %s", k.Name, c.d.errorString(rc))
		}
		c.funcs[k.Name] = fn
	}
	return nil
}

// Launch enqueues one kernel: a device pointer per operand (in catalogue
// order), then n = rows, then the parameter block's device address. The
// dynamic values come from the device block (SetParams), not from p.
func (c *CUDA) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, _ *runtime.Params) error {
	vals, err := runtime.KernelArgs(k, args, rows, c.block, func(r runtime.Ref) (uint64, error) { return device(r, 0) })
	if err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	grid, block, err := runtime.LaunchShape(l)
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", k.Name, err)
	}
	if rows <= 0 {
		return nil
	}
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	fn, ok := c.funcs[k.Name]
	if !ok {
		return fmt.Errorf("cuda: kernel %s was not loaded", k.Name)
	}
	// The driver copies the values when the launch is enqueued.
	ptrs := runtime.PackArgs(c.params, vals)
	rc := c.d.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
		uint32(l.SharedBytes), c.stream, ptrs, nil)
	c.last = k.Name
	if c.capturing {
		c.captured++
	}
	if rc != 0 {
		return fmt.Errorf("cuda: launch %s (grid %v, block %v): %s", k.Name, grid, block, c.d.errorString(rc))
	}
	return nil
}

// SetParams writes the parameter block. The copy is synchronous and ordered
// after every launch already enqueued (the stream is a blocking one), so
// kernels enqueued earlier still see the values they were launched with.
func (c *CUDA) SetParams(p *runtime.Params) error {
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if c.capturing {
		return errors.New("cuda: parameter block written during graph capture")
	}
	if rc := c.d.cuMemcpyHtoD(c.block, unsafe.Pointer(&p[0]), uint64(4*len(p))); rc != 0 {
		return c.async("parameter block upload", rc)
	}
	goruntime.KeepAlive(p)
	return nil
}

// Sync waits for every launch; an error from a kernel names the last one.
func (c *CUDA) Sync() error {
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return errClosed
	}
	if c.capturing {
		return errCapturing
	}
	if rc := c.d.cuStreamSynchronize(c.stream); rc != 0 {
		return c.async("synchronize", rc)
	}
	return nil
}

// Close waits for outstanding work and releases the modules, the stream,
// the pinned block and the context. Memory not freed by then goes with the
// context only when no other user holds it; callers free theirs first.
func (c *CUDA) Close() error {
	unlock := c.enter()
	defer unlock()
	if c.closed {
		return nil
	}
	var errs []error
	if rc := c.d.cuStreamSynchronize(c.stream); rc != 0 {
		errs = append(errs, c.async("synchronize", rc))
	}
	for _, m := range c.modules {
		c.d.cuModuleUnload(m)
	}
	c.modules, c.funcs = nil, nil
	c.d.cuMemFreeHost(c.params)
	c.params = nil
	c.d.cuMemFree(c.block)
	c.block = 0
	c.d.cuStreamDestroy(c.stream)
	c.d.cuDevicePrimaryCtxRelease(c.dev)
	c.closed = true
	return errors.Join(errs...)
}
