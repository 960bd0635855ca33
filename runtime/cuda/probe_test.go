package cuda

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/runtime"
)

// probeLibrary is a library whose device reports name and compute
// capability major.0; fail names an entry point that returns an error.
func probeLibrary(name string, major int32, fail string) (*library, *int) {
	contexts := 0
	rc := func(call string) int32 {
		if call == fail {
			return 101 // CUDA_ERROR_INVALID_DEVICE
		}
		return 0
	}
	l := &library{}
	p, d := &l.probe, &l.driver
	d.Dialect = "cuda"
	d.ErrorName = func(int32) string { return "CUDA_ERROR_INVALID_DEVICE" }
	d.ErrorString = func(int32) string { return "invalid device ordinal" }
	p.cuDriverGetVersion = func(v *int32) int32 { *v = 12080; return rc("cuDriverGetVersion") }
	p.cuDeviceGet = func(dev *int32, ordinal int32) int32 { *dev = ordinal; return rc("cuDeviceGet") }
	p.DeviceGetName = func(b *byte, n int32, dev int32) int32 {
		copy(unsafe.Slice(b, n), name+"\x00")
		return rc("cuDeviceGetName")
	}
	p.DeviceGetAttribute = func(v *int32, attr int32, dev int32) int32 {
		switch attr {
		case attrComputeMajor:
			*v = major
		case attrComputeMinor:
			*v = 0
		}
		return rc("cuDeviceGetAttribute")
	}
	p.cuDevicePrimaryCtxRetain = func(ctx *uintptr, dev int32) int32 {
		if rc("cuDevicePrimaryCtxRetain") != 0 {
			return 101
		}
		contexts++
		*ctx = 7
		return 0
	}
	p.cuDevicePrimaryCtxRelease = func(dev int32) int32 { contexts--; return 0 }
	p.cuCtxSetCurrent = func(uintptr) int32 { return rc("cuCtxSetCurrent") }
	d.MemGetInfo = func(free, total *uint64) int32 {
		*free, *total = 100<<30, 140<<30
		return rc("cuMemGetInfo")
	}
	return l, &contexts
}

func TestProbe(t *testing.T) {
	l, contexts := probeLibrary("NVIDIA H200", 9, "")
	got, err := l.describe()
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.DeviceInfo{API: "CUDA", Name: "NVIDIA H200", Major: 9, Driver: "12.8",
		FreeBytes: 100 << 30, TotalBytes: 140 << 30, Target: Target}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if *contexts != 0 {
		t.Errorf("%d primary contexts left retained", *contexts)
	}
	if s := got.String(); s != "CUDA NVIDIA H200: compute capability 9.0, 100.0 GiB free of 140.0 GiB, driver 12.8, runs sm_90" {
		t.Errorf("String() = %q", s)
	}

	// Another architecture is described, with no target.
	l, _ = probeLibrary("NVIDIA A100", 8, "")
	if got, err := l.describe(); err != nil || got.Target != "" || got.Major != 8 {
		t.Errorf("A100: %+v, %v", got, err)
	}

	for call, want := range map[string]string{
		"cuDriverGetVersion": "cuDriverGetVersion", "cuDeviceGet": "cuDeviceGet", "cuDeviceGetName": "device name",
		"cuDeviceGetAttribute": "compute capability", "cuDevicePrimaryCtxRetain": "cuDevicePrimaryCtxRetain",
		"cuCtxSetCurrent": "cuCtxSetCurrent", "cuMemGetInfo": "cuMemGetInfo",
	} {
		l, contexts := probeLibrary("NVIDIA H200", 9, call)
		_, err := l.describe()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "invalid device ordinal") {
			t.Errorf("%s failing: error %v, want %q", call, err, want)
		}
		if *contexts != 0 {
			t.Errorf("%s failing: %d primary contexts left retained", call, *contexts)
		}
	}
}
