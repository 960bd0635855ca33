package hip

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/aimaproject/aimac/runtime/gpu"
)

// LibraryNames are the HIP runtime libraries New tries, in order: the
// development link first, then the sonames of ROCm 7 and 6.
var LibraryNames = []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"}

// hipDeviceAttribute_t values (ROCm 5 and later; the CUDA-compatible
// values 75 and 76 are those of CUdevice_attribute, not HIP's).
const (
	attrComputeMajor    = 23 // hipDeviceAttributeComputeCapabilityMajor
	attrComputeMinor    = 61 // hipDeviceAttributeComputeCapabilityMinor
	attrMultiprocessors = 63 // hipDeviceAttributeMultiprocessorCount
)

// probe holds the entry points of device probing. hipError_t is a C enum
// (int32).
type probe struct {
	gpu.Prober
	hipInit              func(flags uint32) int32
	hipDriverGetVersion  func(v *int32) int32
	hipRuntimeGetVersion func(v *int32) int32
	hipGetDeviceCount    func(n *int32) int32
	hipSetDevice         func(dev int32) int32
}

// Library is a loaded and initialized HIP runtime library.
type Library struct {
	path    string
	probe   probe
	driver  gpu.Driver // the backend's entry points; MakeCurrent is set per backend
	runtime int32      // hipRuntimeGetVersion
	drv     int32      // hipDriverGetVersion
}

var (
	libMu      sync.Mutex
	libs       = map[string]*Library{} // by the path given to Open
	defaultLib *Library
	defaultErr error
	defaultSet bool
)

// Available reports whether a HIP runtime library can be loaded and
// initialized on this machine; the error says why not.
func Available() error {
	_, err := Default()
	return err
}

// Default loads the first of LibraryNames that the dynamic loader finds,
// once per process.
func Default() (*Library, error) {
	libMu.Lock()
	defer libMu.Unlock()
	if !defaultSet {
		defaultLib, defaultErr = openDefault()
		defaultSet = true
	}
	return defaultLib, defaultErr
}

func openDefault() (*Library, error) {
	var errs []string
	for _, name := range LibraryNames {
		l, err := open(name)
		if err == nil {
			return l, nil
		}
		var le *loadError
		if !errors.As(err, &le) {
			return nil, err // found, but unusable: say why
		}
		errs = append(errs, le.err.Error())
	}
	return nil, fmt.Errorf("hip: cannot load the HIP runtime library (%s): a ROCm runtime is needed to run gfx1151 plans (%s)",
		strings.Join(LibraryNames, ", "), strings.Join(errs, "; "))
}

// Open loads the HIP runtime library at path (a file name the dynamic
// loader resolves, or a path) and initializes it. Opening the same path
// again returns the same Library.
func Open(path string) (*Library, error) {
	libMu.Lock()
	defer libMu.Unlock()
	if l, ok := libs[path]; ok {
		return l, nil
	}
	l, err := open(path)
	if err != nil {
		var le *loadError
		if errors.As(err, &le) {
			return nil, fmt.Errorf("hip: load %s: %w (a ROCm runtime is needed to run gfx1151 plans)", path, le.err)
		}
		return nil, err
	}
	return l, nil
}

// loadError is a library the dynamic loader could not open.
type loadError struct{ err error }

func (e *loadError) Error() string { return e.err.Error() }

// open dlopens path, binds every entry point and calls hipInit; libMu is
// held.
func open(path string) (*Library, error) {
	if l, ok := libs[path]; ok {
		return l, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, &loadError{err}
	}
	l := &Library{path: path}
	p, d := &l.probe, &l.driver
	// hipModuleLaunchKernel needs no attribute for dynamic shared memory up
	// to the LDS size, and HIP has no extended launch with CUDA's
	// attributes: FuncSetAttribute and LaunchKernelEx stay nil, and so does
	// EventRecordWithFlags (timing inside a graph replay; the profile then
	// times launches one by one).
	d.Dialect = "hip"
	if err := gpu.Bind(h, path, symbols(p, d)); err != nil {
		purego.Dlclose(h)
		return nil, fmt.Errorf("hip: %w", err)
	}
	gpu.BindOptional(h, optionalSymbols(d))
	if rc := p.hipInit(0); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipInit: %s", path, d.ErrorText(rc))
	}
	if rc := p.hipRuntimeGetVersion(&l.runtime); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipRuntimeGetVersion: %s", path, d.ErrorText(rc))
	}
	if rc := p.hipDriverGetVersion(&l.drv); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipDriverGetVersion: %s", path, d.ErrorText(rc))
	}
	libs[path] = l
	return l, nil
}

// Path is the library as it was opened.
func (l *Library) Path() string { return l.path }

// Version is the HIP runtime's version, major.minor.patch (HIP_VERSION is
// major·10⁷ + minor·10⁵ + patch).
func (l *Library) Version() string { return version(l.runtime) }

// DriverVersion is the version hipDriverGetVersion reports.
func (l *Library) DriverVersion() string { return version(l.drv) }

func version(v int32) string {
	return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
}

// symbols is the library's entry points: the probe's, then the backend's.
func symbols(p *probe, d *gpu.Driver) []gpu.Symbol {
	return []gpu.Symbol{
		{Func: &p.hipInit, Name: "hipInit"},
		{Func: &p.hipDriverGetVersion, Name: "hipDriverGetVersion"},
		{Func: &p.hipRuntimeGetVersion, Name: "hipRuntimeGetVersion"},
		{Func: &p.hipGetDeviceCount, Name: "hipGetDeviceCount"},
		{Func: &p.hipSetDevice, Name: "hipSetDevice"},
		{Func: &p.DeviceGetName, Name: "hipDeviceGetName"},
		{Func: &p.DeviceGetAttribute, Name: "hipDeviceGetAttribute"},
		{Func: &d.MemAlloc, Name: "hipMalloc"},
		{Func: &d.MemFree, Name: "hipFree"},
		{Func: &d.MemGetInfo, Name: "hipMemGetInfo"},
		{Func: &d.HostAlloc, Name: "hipHostMalloc"},
		{Func: &d.HostFree, Name: "hipHostFree"},
		{Func: &d.MemcpyHtoD, Name: "hipMemcpyHtoD"},
		{Func: &d.MemcpyDtoH, Name: "hipMemcpyDtoH"},
		{Func: &d.MemsetD8, Name: "hipMemsetD8"},
		{Func: &d.MemcpyHtoDAsync, Name: "hipMemcpyHtoDAsync"},
		{Func: &d.MemcpyDtoDAsync, Name: "hipMemcpyDtoDAsync"},
		{Func: &d.MemcpyDtoHAsync, Name: "hipMemcpyDtoHAsync"},
		{Func: &d.ModuleLoadData, Name: "hipModuleLoadData"},
		{Func: &d.ModuleUnload, Name: "hipModuleUnload"},
		{Func: &d.ModuleGetFunction, Name: "hipModuleGetFunction"},
		{Func: &d.LaunchKernel, Name: "hipModuleLaunchKernel"},
		{Func: &d.StreamCreate, Name: "hipStreamCreateWithFlags"},
		{Func: &d.StreamDestroy, Name: "hipStreamDestroy"},
		{Func: &d.StreamSynchronize, Name: "hipStreamSynchronize"},
		{Func: &d.StreamWaitEvent, Name: "hipStreamWaitEvent"},
		{Func: &d.EventCreate, Name: "hipEventCreateWithFlags"},
		{Func: &d.EventDestroy, Name: "hipEventDestroy"},
		{Func: &d.EventRecord, Name: "hipEventRecord"},
		{Func: &d.EventSynchronize, Name: "hipEventSynchronize"},
		{Func: &d.EventElapsedTime, Name: "hipEventElapsedTime"},
		{Func: &d.StreamBeginCapture, Name: "hipStreamBeginCapture"},
		{Func: &d.StreamEndCapture, Name: "hipStreamEndCapture"},
		{Func: &d.GraphInstantiate, Name: "hipGraphInstantiateWithFlags"},
		{Func: &d.GraphLaunch, Name: "hipGraphLaunch"},
		{Func: &d.GraphExecDestroy, Name: "hipGraphExecDestroy"},
		{Func: &d.GraphDestroy, Name: "hipGraphDestroy"},
		{Func: &d.ErrorName, Name: "hipGetErrorName"},
		{Func: &d.ErrorString, Name: "hipGetErrorString"},
	}
}

// optionalSymbols are the entry points the backend can do without: the
// occupancy query of the engine's residency check (a grid barrier's
// launch), without which such launches take their fallback.
func optionalSymbols(d *gpu.Driver) []gpu.Symbol {
	return []gpu.Symbol{{Func: &d.OccupancyMaxActiveBlocks, Name: "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor"}}
}
