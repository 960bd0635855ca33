package hip

import (
	"errors"
	"fmt"
	goruntime "runtime"

	"github.com/ebitengine/purego"

	"github.com/aimaproject/aimac/runtime"
)

// Probe describes device 0 of the default HIP runtime library (see
// Default); the error says why there is none to describe.
func Probe() (runtime.DeviceInfo, error) {
	l, err := Default()
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	return l.Probe()
}

// Probe describes device 0 of the library: its name, compute capability,
// the runtime's version and the device's free and total memory.
func (l *Library) Probe() (runtime.DeviceInfo, error) {
	a := &l.api
	info := runtime.DeviceInfo{API: "HIP", Driver: l.Version()}
	fail := func(call string, rc int32) (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, fmt.Errorf("hip: %s: %s", call, a.errorString(rc))
	}
	var count int32
	if rc := a.hipGetDeviceCount(&count); rc != 0 || count == 0 {
		if rc == 0 {
			return runtime.DeviceInfo{}, errors.New("hip: no HIP device")
		}
		return fail("hipGetDeviceCount", rc)
	}
	// The runtime's current device is per thread.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if rc := a.hipSetDevice(0); rc != 0 {
		return fail("hipSetDevice", rc)
	}
	var name [256]byte
	if rc := a.hipDeviceGetName(&name[0], int32(len(name)), 0); rc != 0 {
		return fail("hipDeviceGetName", rc)
	}
	info.Name = cString(name[:])
	var cc [2]int32
	for i, attr := range []int32{attrComputeMajor, attrComputeMinor} {
		if rc := a.hipDeviceGetAttribute(&cc[i], attr, 0); rc != 0 {
			return fail("hipDeviceGetAttribute", rc)
		}
	}
	info.Major, info.Minor = int(cc[0]), int(cc[1])
	if cc[0] == 11 { // New's condition: gfx1151 code objects run on gfx11xx
		info.Target = Target
	}
	memGetInfo, err := l.memGetInfo()
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	var free, total uintptr
	if rc := memGetInfo(&free, &total); rc != 0 {
		return fail("hipMemGetInfo", rc)
	}
	info.FreeBytes, info.TotalBytes = int64(free), int64(total)
	return info, nil
}

// memGetInfo binds hipMemGetInfo, which only Probe uses, from the
// library's file (dlopen of an open library returns its handle again).
func (l *Library) memGetInfo() (func(free, total *uintptr) int32, error) {
	h, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("hip: %s: %w", l.path, err)
	}
	sym, err := purego.Dlsym(h, "hipMemGetInfo")
	if err != nil {
		return nil, fmt.Errorf("hip: %s has no hipMemGetInfo: %w", l.path, err)
	}
	var fn func(free, total *uintptr) int32
	purego.RegisterFunc(&fn, sym)
	return fn, nil
}
