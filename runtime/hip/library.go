package hip

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LibraryNames are the HIP runtime libraries New tries, in order: the
// development link first, then the sonames of ROCm 7 and 6.
var LibraryNames = []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"}

// Enumerations of hip_runtime_api.h.
const (
	// hipDeviceAttribute_t (ROCm 5 and later; the CUDA-compatible values
	// 75 and 76 are those of CUdevice_attribute, not HIP's).
	attrComputeMajor = 23 // hipDeviceAttributeComputeCapabilityMajor
	attrComputeMinor = 61 // hipDeviceAttributeComputeCapabilityMinor
	// hipStreamCaptureMode: only unsafe calls made by the capturing thread
	// itself invalidate the capture.
	captureThreadLocal = 1 // hipStreamCaptureModeThreadLocal
	// hipHostMallocDefault.
	hostMallocDefault = 0
)

// api holds the HIP runtime entry points the backend uses. hipError_t is a
// C enum (int32). Device pointers and handles (hipStream_t, hipModule_t,
// hipFunction_t, hipGraph_t, hipGraphExec_t) are uintptr values and never
// Go pointers; out parameters point at Go values that hold no Go pointers.
type api struct {
	hipInit               func(flags uint32) int32
	hipDriverGetVersion   func(v *int32) int32
	hipRuntimeGetVersion  func(v *int32) int32
	hipGetDeviceCount     func(n *int32) int32
	hipSetDevice          func(dev int32) int32
	hipDeviceGetName      func(name *byte, size int32, dev int32) int32
	hipDeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	hipMalloc             func(ptr *uintptr, bytes uintptr) int32
	hipFree               func(ptr uintptr) int32
	hipHostMalloc         func(ptr *unsafe.Pointer, bytes uintptr, flags uint32) int32
	hipHostFree           func(ptr unsafe.Pointer) int32
	hipMemcpyHtoD         func(dst uintptr, src unsafe.Pointer, bytes uintptr) int32
	hipMemcpyDtoH         func(dst unsafe.Pointer, src uintptr, bytes uintptr) int32
	hipMemset             func(dst uintptr, value int32, bytes uintptr) int32
	hipModuleLoadData     func(mod *uintptr, image unsafe.Pointer) int32
	hipModuleUnload       func(mod uintptr) int32
	hipModuleGetFunction  func(fn *uintptr, mod uintptr, name string) int32
	hipModuleLaunchKernel func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	hipStreamCreate       func(stream *uintptr) int32
	hipStreamDestroy      func(stream uintptr) int32
	hipStreamSynchronize  func(stream uintptr) int32
	hipStreamBeginCapture func(stream uintptr, mode int32) int32
	hipStreamEndCapture   func(stream uintptr, graph *uintptr) int32
	hipGraphInstantiate   func(exec *uintptr, graph uintptr, errNode *uintptr, log *byte, size uintptr) int32
	hipGraphLaunch        func(exec uintptr, stream uintptr) int32
	hipGraphExecDestroy   func(exec uintptr) int32
	hipGraphDestroy       func(graph uintptr) int32
	hipGetErrorName       func(rc int32) string
	hipGetErrorString     func(rc int32) string
}

// Library is a loaded and initialized HIP runtime library.
type Library struct {
	path    string
	api     api
	runtime int32 // hipRuntimeGetVersion
	driver  int32 // hipDriverGetVersion
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
	a := &l.api
	syms := []struct {
		fptr any
		name string
	}{
		{&a.hipInit, "hipInit"},
		{&a.hipDriverGetVersion, "hipDriverGetVersion"},
		{&a.hipRuntimeGetVersion, "hipRuntimeGetVersion"},
		{&a.hipGetDeviceCount, "hipGetDeviceCount"},
		{&a.hipSetDevice, "hipSetDevice"},
		{&a.hipDeviceGetName, "hipDeviceGetName"},
		{&a.hipDeviceGetAttribute, "hipDeviceGetAttribute"},
		{&a.hipMalloc, "hipMalloc"},
		{&a.hipFree, "hipFree"},
		{&a.hipHostMalloc, "hipHostMalloc"},
		{&a.hipHostFree, "hipHostFree"},
		{&a.hipMemcpyHtoD, "hipMemcpyHtoD"},
		{&a.hipMemcpyDtoH, "hipMemcpyDtoH"},
		{&a.hipMemset, "hipMemset"},
		{&a.hipModuleLoadData, "hipModuleLoadData"},
		{&a.hipModuleUnload, "hipModuleUnload"},
		{&a.hipModuleGetFunction, "hipModuleGetFunction"},
		{&a.hipModuleLaunchKernel, "hipModuleLaunchKernel"},
		{&a.hipStreamCreate, "hipStreamCreate"},
		{&a.hipStreamDestroy, "hipStreamDestroy"},
		{&a.hipStreamSynchronize, "hipStreamSynchronize"},
		{&a.hipStreamBeginCapture, "hipStreamBeginCapture"},
		{&a.hipStreamEndCapture, "hipStreamEndCapture"},
		{&a.hipGraphInstantiate, "hipGraphInstantiate"},
		{&a.hipGraphLaunch, "hipGraphLaunch"},
		{&a.hipGraphExecDestroy, "hipGraphExecDestroy"},
		{&a.hipGraphDestroy, "hipGraphDestroy"},
		{&a.hipGetErrorName, "hipGetErrorName"},
		{&a.hipGetErrorString, "hipGetErrorString"},
	}
	for _, s := range syms {
		sym, err := purego.Dlsym(h, s.name)
		if err != nil {
			purego.Dlclose(h)
			return nil, fmt.Errorf("hip: %s has no %s: %w", path, s.name, err)
		}
		purego.RegisterFunc(s.fptr, sym)
	}
	if rc := a.hipInit(0); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipInit: %s", path, a.errorString(rc))
	}
	if rc := a.hipRuntimeGetVersion(&l.runtime); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipRuntimeGetVersion: %s", path, a.errorString(rc))
	}
	if rc := a.hipDriverGetVersion(&l.driver); rc != 0 {
		return nil, fmt.Errorf("hip: %s: hipDriverGetVersion: %s", path, a.errorString(rc))
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
func (l *Library) DriverVersion() string { return version(l.driver) }

func version(v int32) string {
	return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
}

// errorString is the runtime's name and description of a result code.
func (a *api) errorString(rc int32) string {
	n, s := a.hipGetErrorName(rc), a.hipGetErrorString(rc)
	switch {
	case n == "" && s == "":
		return fmt.Sprintf("HIP error %d", rc)
	case s == "":
		return fmt.Sprintf("%s (%d)", n, rc)
	}
	return fmt.Sprintf("%s (%d): %s", n, rc, s)
}

// cString copies a NUL-terminated string out of a fixed buffer.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
