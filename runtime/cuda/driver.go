package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/aimaproject/aimac/runtime/gpu"
)

// libName is the CUDA driver library, installed with the NVIDIA driver.
const libName = "libcuda.so.1"

// probe holds the entry points of device probing and the context.
type probe struct {
	gpu.Prober
	cuInit                    func(flags uint32) int32
	cuDriverGetVersion        func(v *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuGetErrorName            func(rc int32, str *unsafe.Pointer) int32
	cuGetErrorString          func(rc int32, str *unsafe.Pointer) int32
}

// library is libcuda.so.1, bound.
type library struct {
	probe  probe
	driver gpu.Driver // MakeCurrent is set per backend
}

var (
	loadOnce sync.Once
	lib      *library
	loadErr  error
)

// Available reports whether the CUDA driver library can be loaded and
// initialized on this machine; the error says why not.
func Available() error {
	_, err := load()
	return err
}

// load opens libcuda.so.1 once and binds every entry point. The names are
// the ABI versions cuda.h maps the API's names to (_v2 where it does).
func load() (*library, error) {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(libName, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			loadErr = fmt.Errorf("cuda: load %s: %w", libName, err)
			return
		}
		l := &library{}
		p, d := &l.probe, &l.driver
		if err := gpu.Bind(h, libName, symbols(p, d)); err != nil {
			loadErr = fmt.Errorf("cuda: %w", err)
			return
		}
		gpu.BindOptional(h, optionalSymbols(d))
		d.Dialect = "cuda"
		d.ErrorName = func(rc int32) string { return p.text(p.cuGetErrorName, rc) }
		d.ErrorString = func(rc int32) string { return p.text(p.cuGetErrorString, rc) }
		if rc := p.cuInit(0); rc != 0 {
			loadErr = fmt.Errorf("cuda: cuInit: %s", d.ErrorText(rc))
			return
		}
		lib = l
	})
	return lib, loadErr
}

// text is what cuGetErrorName or cuGetErrorString says of rc ("" for an
// unknown code): a string owned by the driver, copied.
func (*probe) text(call func(int32, *unsafe.Pointer) int32, rc int32) string {
	var s unsafe.Pointer
	if call(rc, &s) != 0 {
		return ""
	}
	return gpu.CString(s)
}

// symbols is the library's entry points: the probe's, then the backend's.
func symbols(p *probe, d *gpu.Driver) []gpu.Symbol {
	return []gpu.Symbol{
		{Func: &p.cuInit, Name: "cuInit"},
		{Func: &p.cuDriverGetVersion, Name: "cuDriverGetVersion"},
		{Func: &p.cuDeviceGet, Name: "cuDeviceGet"},
		{Func: &p.DeviceGetName, Name: "cuDeviceGetName"},
		{Func: &p.DeviceGetAttribute, Name: "cuDeviceGetAttribute"},
		{Func: &p.cuDevicePrimaryCtxRetain, Name: "cuDevicePrimaryCtxRetain"},
		{Func: &p.cuDevicePrimaryCtxRelease, Name: "cuDevicePrimaryCtxRelease_v2"},
		{Func: &p.cuCtxSetCurrent, Name: "cuCtxSetCurrent"},
		{Func: &p.cuGetErrorName, Name: "cuGetErrorName"},
		{Func: &p.cuGetErrorString, Name: "cuGetErrorString"},
		{Func: &d.MemAlloc, Name: "cuMemAlloc_v2"},
		{Func: &d.MemFree, Name: "cuMemFree_v2"},
		{Func: &d.MemGetInfo, Name: "cuMemGetInfo_v2"},
		{Func: &d.HostAlloc, Name: "cuMemHostAlloc"},
		{Func: &d.HostFree, Name: "cuMemFreeHost"},
		{Func: &d.MemcpyHtoD, Name: "cuMemcpyHtoD_v2"},
		{Func: &d.MemcpyDtoH, Name: "cuMemcpyDtoH_v2"},
		{Func: &d.MemsetD8, Name: "cuMemsetD8_v2"},
		{Func: &d.MemcpyHtoDAsync, Name: "cuMemcpyHtoDAsync_v2"},
		{Func: &d.MemcpyDtoDAsync, Name: "cuMemcpyDtoDAsync_v2"},
		{Func: &d.MemcpyDtoHAsync, Name: "cuMemcpyDtoHAsync_v2"},
		{Func: &d.ModuleLoadData, Name: "cuModuleLoadData"},
		{Func: &d.ModuleUnload, Name: "cuModuleUnload"},
		{Func: &d.ModuleGetFunction, Name: "cuModuleGetFunction"},
		{Func: &d.FuncSetAttribute, Name: "cuFuncSetAttribute"},
		{Func: &d.LaunchKernel, Name: "cuLaunchKernel"},
		{Func: &d.LaunchKernelEx, Name: "cuLaunchKernelEx"},
		{Func: &d.StreamCreate, Name: "cuStreamCreate"},
		{Func: &d.StreamDestroy, Name: "cuStreamDestroy_v2"},
		{Func: &d.StreamSynchronize, Name: "cuStreamSynchronize"},
		{Func: &d.StreamWaitEvent, Name: "cuStreamWaitEvent"},
		{Func: &d.EventCreate, Name: "cuEventCreate"},
		{Func: &d.EventDestroy, Name: "cuEventDestroy_v2"},
		{Func: &d.EventRecord, Name: "cuEventRecord"},
		{Func: &d.EventSynchronize, Name: "cuEventSynchronize"},
		{Func: &d.EventElapsedTime, Name: "cuEventElapsedTime"},
		{Func: &d.EventRecordWithFlags, Name: "cuEventRecordWithFlags"},
		{Func: &d.StreamBeginCapture, Name: "cuStreamBeginCapture_v2"},
		{Func: &d.StreamEndCapture, Name: "cuStreamEndCapture"},
		{Func: &d.GraphInstantiate, Name: "cuGraphInstantiateWithFlags"},
		{Func: &d.GraphLaunch, Name: "cuGraphLaunch"},
		{Func: &d.GraphExecDestroy, Name: "cuGraphExecDestroy"},
		{Func: &d.GraphDestroy, Name: "cuGraphDestroy"},
	}
}

// optionalSymbols are the entry points the backend can do without: the
// occupancy query of the engine's residency check (a grid barrier's
// launch), without which such launches take their fallback.
func optionalSymbols(d *gpu.Driver) []gpu.Symbol {
	return []gpu.Symbol{{Func: &d.OccupancyMaxActiveBlocks, Name: "cuOccupancyMaxActiveBlocksPerMultiprocessor"}}
}
