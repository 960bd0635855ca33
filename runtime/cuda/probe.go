package cuda

import (
	"fmt"
	goruntime "runtime"

	"github.com/aimaproject/aimac/runtime"
)

// Probe describes device 0 through the driver: its name, compute
// capability, driver version and free and total memory (read in the
// device's primary context, released again). The error says why there is
// no device to describe (no driver library, no device, a driver error).
func Probe() (runtime.DeviceInfo, error) {
	l, err := load()
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	return l.describe()
}

func (l *library) describe() (runtime.DeviceInfo, error) {
	p, d := &l.probe, &l.driver
	info := runtime.DeviceInfo{API: "CUDA"}
	fail := func(call string, rc int32) (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, fmt.Errorf("cuda: %s: %s", call, d.ErrorText(rc))
	}
	var v int32
	if rc := p.cuDriverGetVersion(&v); rc != 0 {
		return fail("cuDriverGetVersion", rc)
	}
	info.Driver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	var dev int32
	if rc := p.cuDeviceGet(&dev, 0); rc != 0 {
		return fail("cuDeviceGet", rc)
	}
	name, cc, err := p.Identify(d, dev, attrComputeMajor, attrComputeMinor)
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	info.Name, info.Major, info.Minor = name, int(cc[0]), int(cc[1])
	if cc[0] == 9 { // NewCUDA's condition: sm_90 code runs on 9.x
		info.Target = Target
	}
	// The driver's current context is per thread.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var ctx uintptr
	if rc := p.cuDevicePrimaryCtxRetain(&ctx, dev); rc != 0 {
		return fail("cuDevicePrimaryCtxRetain", rc)
	}
	defer p.cuDevicePrimaryCtxRelease(dev)
	if rc := p.cuCtxSetCurrent(ctx); rc != 0 {
		return fail("cuCtxSetCurrent", rc)
	}
	defer p.cuCtxSetCurrent(0)
	var free, total uint64
	if rc := d.MemGetInfo(&free, &total); rc != 0 {
		return fail("cuMemGetInfo", rc)
	}
	info.FreeBytes, info.TotalBytes = int64(free), int64(total)
	return info, nil
}
