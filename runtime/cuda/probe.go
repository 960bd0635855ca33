package cuda

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"github.com/aimaproject/aimac/runtime"
)

// Probe describes device 0 through the driver: its name, compute
// capability, driver version and free and total memory (read in the
// device's primary context, released again). The error says why there is
// no device to describe (no driver library, no device, a driver error).
func Probe() (runtime.DeviceInfo, error) {
	d, err := load()
	if err != nil {
		return runtime.DeviceInfo{}, err
	}
	return d.probe()
}

func (d *driver) probe() (runtime.DeviceInfo, error) {
	info := runtime.DeviceInfo{API: "CUDA"}
	fail := func(call string, rc int32) (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, fmt.Errorf("cuda: %s: %s", call, d.errorString(rc))
	}
	var v int32
	if rc := d.cuDriverGetVersion(&v); rc != 0 {
		return fail("cuDriverGetVersion", rc)
	}
	info.Driver = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	var dev int32
	if rc := d.cuDeviceGet(&dev, 0); rc != 0 {
		return fail("cuDeviceGet", rc)
	}
	var name [256]byte
	if rc := d.cuDeviceGetName(&name[0], int32(len(name)), dev); rc != 0 {
		return fail("cuDeviceGetName", rc)
	}
	info.Name = cString(unsafe.Pointer(&name[0]))
	var cc [2]int32
	for i, attr := range []int32{attrComputeMajor, attrComputeMinor} {
		if rc := d.cuDeviceGetAttribute(&cc[i], attr, dev); rc != 0 {
			return fail("cuDeviceGetAttribute", rc)
		}
	}
	info.Major, info.Minor = int(cc[0]), int(cc[1])
	if cc[0] == 9 { // NewCUDA's condition: sm_90 code runs on 9.x
		info.Target = Target
	}
	// The driver's current context is per thread.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var ctx uintptr
	if rc := d.cuDevicePrimaryCtxRetain(&ctx, dev); rc != 0 {
		return fail("cuDevicePrimaryCtxRetain", rc)
	}
	defer d.cuDevicePrimaryCtxRelease(dev)
	if rc := d.cuCtxSetCurrent(ctx); rc != 0 {
		return fail("cuCtxSetCurrent", rc)
	}
	defer d.cuCtxSetCurrent(0)
	var free, total uint64
	if rc := d.cuMemGetInfo(&free, &total); rc != 0 {
		return fail("cuMemGetInfo", rc)
	}
	info.FreeBytes, info.TotalBytes = int64(free), int64(total)
	return info, nil
}
