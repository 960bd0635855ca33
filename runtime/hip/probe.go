package hip

import (
	"errors"
	"fmt"
	goruntime "runtime"

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
	p, d := &l.probe, &l.driver
	info := runtime.DeviceInfo{API: "HIP", Driver: l.Version()}
	fail := func(call string, rc int32) (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, fmt.Errorf("hip: %s: %s", call, d.ErrorText(rc))
	}
	var count int32
	if rc := p.hipGetDeviceCount(&count); rc != 0 || count == 0 {
		if rc == 0 {
			return runtime.DeviceInfo{}, errors.New("hip: no HIP device")
		}
		return fail("hipGetDeviceCount", rc)
	}
	// The runtime's current device is per thread.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if rc := p.hipSetDevice(0); rc != 0 {
		return fail("hipSetDevice", rc)
	}
	name, cc, err := p.Identify(d, 0, attrComputeMajor, attrComputeMinor)
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	info.Name, info.Major, info.Minor = name, int(cc[0]), int(cc[1])
	if cc[0] == 11 { // New's condition: gfx1151 code objects run on gfx11xx
		info.Target = Target
	}
	var free, total uint64
	if rc := d.MemGetInfo(&free, &total); rc != 0 {
		return fail("hipMemGetInfo", rc)
	}
	info.FreeBytes, info.TotalBytes = int64(free), int64(total)
	return info, nil
}
