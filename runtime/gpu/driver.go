// Package gpu is the runtime's GPU backend, written once for every vendor:
// device memory, copies, module load, kernel launches with codegen's ABI
// (runtime.KernelArgs), the parameter block, graph capture and replay, a
// second stream joined by events (runtime.StreamForker), launches with
// attributes (runtime.AttrLauncher), the parallel pinned-staging uploader
// (runtime.BulkUploader) and the release of everything on Close.
//
// It runs over a Driver: a table of the vendor API's entry points with the
// C signatures both the CUDA driver API and the HIP runtime share. Packages
// runtime/cuda and runtime/hip fill that table with purego (no cgo) and
// probe the device; nothing else differs between them.
//
// Every launch goes on one blocking stream; uploads, downloads and memsets
// are synchronous copies on the legacy null stream, which a blocking
// stream is ordered with, so the engine sees the same sequential semantics
// as on the CPU. Kernel argument values, the kernelParams pointer array and
// the extended launch's configuration live in pinned host memory allocated
// once by the driver: no Go memory is handed to a launch.
//
// The driver's current context (CUDA) or device (HIP) is per OS thread:
// every call pins its goroutine to its thread and makes it current there
// first (Driver.MakeCurrent).
package gpu

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Driver is the vendor API the backend runs on. Every entry point returns
// the API's result code (CUresult, hipError_t: 0 is success). Device
// pointers are uint64 values and never Go pointers; handles (streams,
// events, modules, functions, graphs) are uintptr values; out parameters
// point at Go values that hold no Go pointers. A nil entry point is one
// the vendor lacks; the backend says so where it is needed.
type Driver struct {
	// Dialect prefixes errors: "cuda", "hip".
	Dialect string

	// MakeCurrent makes the backend's context or device current on the
	// calling (locked) OS thread.
	MakeCurrent func() int32

	MemAlloc   func(p *uint64, bytes uint64) int32
	MemFree    func(p uint64) int32
	MemGetInfo func(free, total *uint64) int32
	// HostAlloc allocates pinned host memory (flags 0).
	HostAlloc func(p *unsafe.Pointer, bytes uint64, flags uint32) int32
	HostFree  func(p unsafe.Pointer) int32

	// Synchronous copies and memset on the legacy null stream.
	MemcpyHtoD func(dst uint64, src unsafe.Pointer, bytes uint64) int32
	MemcpyDtoH func(dst unsafe.Pointer, src uint64, bytes uint64) int32
	MemsetD8   func(dst uint64, value uint8, n uint64) int32
	// Asynchronous copies on a stream: the uploader's from pinned staging
	// buffers (and a step graph's parameter block and input), and device to
	// device in stream order.
	MemcpyHtoDAsync func(dst uint64, src unsafe.Pointer, bytes uint64, stream uintptr) int32
	MemcpyDtoDAsync func(dst, src uint64, bytes uint64, stream uintptr) int32
	// MemcpyDtoHAsync copies into pinned host memory in stream order (a
	// step graph's result).
	MemcpyDtoHAsync func(dst unsafe.Pointer, src uint64, bytes uint64, stream uintptr) int32

	ModuleLoadData    func(mod *uintptr, image unsafe.Pointer) int32
	ModuleUnload      func(mod uintptr) int32
	ModuleGetFunction func(fn *uintptr, mod uintptr, name string) int32
	// FuncSetAttribute sets a function attribute (cuFuncSetAttribute); nil
	// where the vendor needs none for what the backend sets.
	FuncSetAttribute func(fn uintptr, attr int32, value int32) int32

	// OccupancyMaxActiveBlocks is how many blocks of blockSize threads
	// and dynamicShared bytes of a function one multiprocessor holds at
	// once (cuOccupancyMaxActiveBlocksPerMultiprocessor,
	// hipModuleOccupancyMaxActiveBlocksPerMultiprocessor); nil where the
	// binding has none, and then no grid counts as resident (Resident).
	OccupancyMaxActiveBlocks func(blocks *int32, fn uintptr, blockSize int32, dynamicShared uint64) int32

	LaunchKernel func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32
	// LaunchKernelEx launches with a CUlaunchConfig (launchConfig); nil
	// where the vendor has no extended launch.
	LaunchKernelEx func(config unsafe.Pointer, fn uintptr, params, extra unsafe.Pointer) int32

	StreamCreate      func(stream *uintptr, flags uint32) int32
	StreamDestroy     func(stream uintptr) int32
	StreamSynchronize func(stream uintptr) int32
	StreamWaitEvent   func(stream, event uintptr, flags uint32) int32

	EventCreate      func(event *uintptr, flags uint32) int32
	EventDestroy     func(event uintptr) int32
	EventRecord      func(event, stream uintptr) int32
	EventSynchronize func(event uintptr) int32
	EventElapsedTime func(ms *float32, start, end uintptr) int32
	// EventRecordWithFlags with eventRecordExternal records an event as a
	// node of the graph being captured (timing inside a replay,
	// GraphMarks); nil where the vendor has none.
	EventRecordWithFlags func(event, stream uintptr, flags uint32) int32

	StreamBeginCapture func(stream uintptr, mode uint32) int32
	StreamEndCapture   func(stream uintptr, graph *uintptr) int32
	GraphInstantiate   func(exec *uintptr, graph uintptr, flags uint64) int32
	GraphLaunch        func(exec, stream uintptr) int32
	GraphExecDestroy   func(exec uintptr) int32
	GraphDestroy       func(graph uintptr) int32

	// ErrorName and ErrorString describe a result code ("" if unknown).
	ErrorName   func(rc int32) string
	ErrorString func(rc int32) string
}

// Enumerations whose values the CUDA driver API and the HIP runtime share.
const (
	// streamDefault (CU_STREAM_DEFAULT, hipStreamDefault): a blocking
	// stream, ordered with the legacy null stream.
	streamDefault = 0
	// Event flags: waited on by a sleeping thread; never timed.
	eventBlockingSync  = 1 // CU_EVENT_BLOCKING_SYNC, hipEventBlockingSync
	eventDisableTiming = 2 // CU_EVENT_DISABLE_TIMING, hipEventDisableTiming
	// captureThreadLocal (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
	// hipStreamCaptureModeThreadLocal): only unsafe calls made by the
	// capturing thread itself invalidate the capture.
	captureThreadLocal = 1
	// eventRecordExternal (CU_EVENT_RECORD_EXTERNAL): during capture, an
	// event-record node instead of a dependency between streams.
	eventRecordExternal = 1
	// funcAttrMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
	funcAttrMaxDynamicShared = 8
	// DefaultSharedLimit is the dynamic shared memory a kernel gets without
	// raising its limit (FuncSetAttribute): 48 KB.
	DefaultSharedLimit = 48 << 10
)

// Symbol is one entry point to bind: a pointer to a func field of a Driver
// (or of a binding's own table) and the library's symbol name.
type Symbol struct {
	Func any
	Name string
}

// Bind looks up every symbol in the library handle (purego.Dlopen) and
// binds it; the first one missing is an error naming it.
func Bind(lib uintptr, libName string, syms []Symbol) error {
	for _, s := range syms {
		sym, err := purego.Dlsym(lib, s.Name)
		if err != nil {
			return fmt.Errorf("%s has no %s: %w", libName, s.Name, err)
		}
		purego.RegisterFunc(s.Func, sym)
	}
	return nil
}

// BindOptional binds the symbols the library has and leaves the others'
// func fields nil: entry points the backend can do without.
func BindOptional(lib uintptr, syms []Symbol) {
	for _, s := range syms {
		if sym, err := purego.Dlsym(lib, s.Name); err == nil {
			purego.RegisterFunc(s.Func, sym)
		}
	}
}

// ErrorText is a result code's name and description, as an error says it.
func (d *Driver) ErrorText(rc int32) string {
	n, s := d.ErrorName(rc), d.ErrorString(rc)
	switch {
	case n == "" && s == "":
		return fmt.Sprintf("%s error %d", d.Dialect, rc)
	case s == "":
		return fmt.Sprintf("%s (%d)", n, rc)
	}
	return fmt.Sprintf("%s (%d): %s", n, rc, s)
}

// CString copies a NUL-terminated string owned by the driver (at most
// 4096 bytes).
func CString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// check reports the first entry point a driver lacks that the backend
// cannot do without (all but FuncSetAttribute, LaunchKernelEx,
// EventRecordWithFlags and OccupancyMaxActiveBlocks).
func (d *Driver) check() error {
	v := reflect.ValueOf(d).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if v.Field(i).Kind() == reflect.Func && v.Field(i).IsNil() && name != "FuncSetAttribute" && name != "LaunchKernelEx" && name != "EventRecordWithFlags" &&
			name != "OccupancyMaxActiveBlocks" {
			return fmt.Errorf("gpu: the %s driver has no %s", d.Dialect, name)
		}
	}
	return nil
}

// Prober is the part of device probing whose entry points both vendors
// share (cuDeviceGetName, hipDeviceGetName; cuDeviceGetAttribute,
// hipDeviceGetAttribute).
type Prober struct {
	DeviceGetName      func(name *byte, size int32, dev int32) int32
	DeviceGetAttribute func(v *int32, attr int32, dev int32) int32
}

// Identify reads device dev's name and its compute capability from the
// vendor's major and minor attributes; d names the errors.
func (p *Prober) Identify(d *Driver, dev, major, minor int32) (name string, cc [2]int32, err error) {
	var buf [256]byte
	if rc := p.DeviceGetName(&buf[0], int32(len(buf)), dev); rc != 0 {
		return "", cc, fmt.Errorf("%s: device name: %s", d.Dialect, d.ErrorText(rc))
	}
	for i, attr := range []int32{major, minor} {
		if rc := p.DeviceGetAttribute(&cc[i], attr, dev); rc != 0 {
			return "", cc, fmt.Errorf("%s: compute capability: %s", d.Dialect, d.ErrorText(rc))
		}
	}
	return CString(unsafe.Pointer(&buf[0])), cc, nil
}
