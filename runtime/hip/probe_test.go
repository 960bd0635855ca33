package hip_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/runtime"
)

// TestProbe describes the fake's device as doctor sees it: name, compute
// capability, the runtime's version, memory (less what is allocated), and
// the target only for a gfx11 device.
func TestProbe(t *testing.T) {
	for _, c := range []struct {
		name         string
		dev          string
		major, minor int32
		count        int32
		fail         string
		want         runtime.DeviceInfo
		wantErr      string
	}{
		{name: "gfx1151", dev: "AMD Radeon 8060S Graphics", major: 11, minor: 5, count: 1,
			want: runtime.DeviceInfo{API: "HIP", Name: "AMD Radeon 8060S Graphics", Major: 11, Minor: 5, Driver: "6.4.43483",
				TotalBytes: 96 << 30, Target: "gfx1151"}},
		{name: "gfx90a", dev: "AMD Instinct MI210", major: 9, minor: 0, count: 1,
			want: runtime.DeviceInfo{API: "HIP", Name: "AMD Instinct MI210", Major: 9, Driver: "6.4.43483",
				FreeBytes: 96 << 30, TotalBytes: 96 << 30}},
		{name: "no device", dev: "gfx1151", major: 11, minor: 5, count: 0, wantErr: "hip: hipGetDeviceCount: hipErrorNoDevice (100)"},
		{name: "set device fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipSetDevice", wantErr: "hip: hipSetDevice: hipErrorInvalidDevice (101)"},
		{name: "name fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipDeviceGetName", wantErr: "hip: device name: hipErrorInvalidDevice (101)"},
		{name: "attribute fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipDeviceGetAttribute", wantErr: "hip: compute capability: hipErrorInvalidDevice (101)"},
		{name: "memory fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipMemGetInfo", wantErr: "hip: hipMemGetInfo: hipErrorInvalidDevice (101)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakeHIP(t)
			f.device(c.dev, c.major, c.minor, c.count)
			want := c.want
			if c.major == 11 && c.count > 0 {
				// An open backend's allocations count against free memory:
				// a 1 MiB buffer on top of what the backend holds itself.
				h, err := f.lib.New(nil)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				before, err := f.lib.Probe()
				if err != nil {
					t.Fatal(err)
				}
				m, err := h.Alloc(1 << 20)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Free(m)
				want.FreeBytes = before.FreeBytes - 1<<20
				if held := before.TotalBytes - before.FreeBytes; held <= 0 || held > 1<<20 {
					t.Errorf("an open backend holds %d bytes", held)
				}
			}
			if c.fail != "" {
				f.fail(c.fail, 101)
			}
			got, err := f.lib.Probe()
			if c.wantErr != "" {
				wantErr(t, "Probe", err, c.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
