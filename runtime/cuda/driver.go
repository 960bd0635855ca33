package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libName is the CUDA driver library, installed with the NVIDIA driver.
const libName = "libcuda.so.1"

// driver holds the driver API entry points used by the backend. Device
// pointers (CUdeviceptr) are uint64 values and never Go pointers; out
// parameters point at Go values that hold no Go pointers.
type driver struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDeviceGetName           func(name *byte, size int32, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuMemAlloc                func(dptr *uint64, bytes uint64) int32
	cuMemFree                 func(dptr uint64) int32
	cuMemAllocHost            func(pp *unsafe.Pointer, bytes uint64) int32
	cuMemFreeHost             func(p unsafe.Pointer) int32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, bytes uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, bytes uint64) int32
	cuMemsetD8                func(dst uint64, value uint8, n uint64) int32
	cuModuleLoadData          func(mod *uintptr, image unsafe.Pointer) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name string) int32
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuStreamCreate            func(stream *uintptr, flags uint32) int32
	cuStreamDestroy           func(stream uintptr) int32
	cuStreamSynchronize       func(stream uintptr) int32
	cuGetErrorString          func(res int32, str *unsafe.Pointer) int32
	cuGetErrorName            func(res int32, str *unsafe.Pointer) int32
	cuDriverGetVersion        func(v *int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, bytes uint64, stream uintptr) int32
	cuMemcpyDtoDAsync         func(dst, src uint64, bytes uint64, stream uintptr) int32
	cuMemsetD32Async          func(dst uint64, value uint32, n uint64, stream uintptr) int32
	cuEventCreate             func(ev *uintptr, flags uint32) int32
	cuEventDestroy            func(ev uintptr) int32
	cuEventRecord             func(ev uintptr, stream uintptr) int32
	cuEventSynchronize        func(ev uintptr) int32
	cuEventElapsedTime        func(ms *float32, start, end uintptr) int32
	cuStreamBeginCapture      func(stream uintptr, mode uint32) int32
	cuStreamEndCapture        func(stream uintptr, graph *uintptr) int32
	cuGraphInstantiate        func(exec *uintptr, graph uintptr, flags uint64) int32
	cuGraphLaunch             func(exec uintptr, stream uintptr) int32
	cuGraphExecDestroy        func(exec uintptr) int32
	cuGraphDestroy            func(graph uintptr) int32
}

var (
	loadOnce sync.Once
	drv      *driver
	loadErr  error
)

// Available reports whether the CUDA driver library can be loaded and
// initialized on this machine; the error says why not.
func Available() error {
	_, err := load()
	return err
}

// load opens libcuda.so.1 once and binds every entry point.
func load() (*driver, error) {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(libName, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			loadErr = fmt.Errorf("cuda: load %s: %w", libName, err)
			return
		}
		d := &driver{}
		syms := []struct {
			fptr any
			name string
		}{
			{&d.cuInit, "cuInit"},
			{&d.cuDeviceGet, "cuDeviceGet"},
			{&d.cuDeviceGetName, "cuDeviceGetName"},
			{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
			{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
			{&d.cuCtxSetCurrent, "cuCtxSetCurrent"},
			{&d.cuMemAlloc, "cuMemAlloc_v2"},
			{&d.cuMemFree, "cuMemFree_v2"},
			{&d.cuMemAllocHost, "cuMemAllocHost_v2"},
			{&d.cuMemFreeHost, "cuMemFreeHost"},
			{&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
			{&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
			{&d.cuMemsetD8, "cuMemsetD8_v2"},
			{&d.cuModuleLoadData, "cuModuleLoadData"},
			{&d.cuModuleUnload, "cuModuleUnload"},
			{&d.cuModuleGetFunction, "cuModuleGetFunction"},
			{&d.cuLaunchKernel, "cuLaunchKernel"},
			{&d.cuStreamCreate, "cuStreamCreate"},
			{&d.cuStreamDestroy, "cuStreamDestroy_v2"},
			{&d.cuStreamSynchronize, "cuStreamSynchronize"},
			{&d.cuGetErrorString, "cuGetErrorString"},
			{&d.cuGetErrorName, "cuGetErrorName"},
			{&d.cuDriverGetVersion, "cuDriverGetVersion"},
			{&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
			{&d.cuMemGetInfo, "cuMemGetInfo_v2"},
			{&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
			{&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
			{&d.cuMemsetD32Async, "cuMemsetD32Async"},
			{&d.cuEventCreate, "cuEventCreate"},
			{&d.cuEventDestroy, "cuEventDestroy_v2"},
			{&d.cuEventRecord, "cuEventRecord"},
			{&d.cuEventSynchronize, "cuEventSynchronize"},
			{&d.cuEventElapsedTime, "cuEventElapsedTime"},
			{&d.cuStreamBeginCapture, "cuStreamBeginCapture_v2"},
			{&d.cuStreamEndCapture, "cuStreamEndCapture"},
			{&d.cuGraphInstantiate, "cuGraphInstantiateWithFlags"},
			{&d.cuGraphLaunch, "cuGraphLaunch"},
			{&d.cuGraphExecDestroy, "cuGraphExecDestroy"},
			{&d.cuGraphDestroy, "cuGraphDestroy"},
		}
		for _, s := range syms {
			sym, err := purego.Dlsym(h, s.name)
			if err != nil {
				loadErr = fmt.Errorf("cuda: %s has no %s: %w", libName, s.name, err)
				return
			}
			purego.RegisterFunc(s.fptr, sym)
		}
		if rc := d.cuInit(0); rc != 0 {
			loadErr = fmt.Errorf("cuda: cuInit: %s", d.errorString(rc))
			return
		}
		drv = d
	})
	return drv, loadErr
}

// errorString is the driver's name and description of a result code.
func (d *driver) errorString(rc int32) string {
	var name, desc unsafe.Pointer
	d.cuGetErrorName(rc, &name)
	d.cuGetErrorString(rc, &desc)
	n, s := cString(name), cString(desc)
	switch {
	case n == "" && s == "":
		return fmt.Sprintf("CUDA error %d", rc)
	case s == "":
		return fmt.Sprintf("%s (%d)", n, rc)
	}
	return fmt.Sprintf("%s (%d): %s", n, rc, s)
}

// cString copies a NUL-terminated string owned by the driver.
func cString(p unsafe.Pointer) string {
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
