// Package cuda is the sm_90 backend of the runtime: the shared GPU backend
// (package runtime/gpu) over the CUDA driver API, loaded at run time from
// libcuda.so.1 with purego (no cgo, no CUDA toolkit). This package binds the
// driver's entry points into the backend's driver table, probes the device
// (name, compute capability, memory) and holds the primary context, made
// current on each calling thread. Kernels come as cubins compiled ahead of
// time (kernel name → code object), so the runtime never runs a compiler;
// importing the package needs no driver, only NewCUDA does.
package cuda

import (
	"fmt"

	"github.com/aimaproject/aimac/runtime/gpu"
)

// Target is the plan target this backend runs.
const Target = "sm_90"

// Device attributes read at start (CUdevice_attribute).
const (
	attrComputeMajor    = 75
	attrComputeMinor    = 76
	attrMultiprocessors = 16 // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
)

// CUDA is a runtime.Backend on one NVIDIA GPU (device 0): the shared GPU
// backend over the CUDA driver API, in the device's primary context.
type CUDA struct {
	*gpu.Backend
	device string
	cc     [2]int32
}

// NewCUDA opens device 0 with its primary context. cubins maps each plan
// kernel's name to its sm_90 code object; Load checks that the plan's
// kernels are all there.
func NewCUDA(cubins map[string][]byte) (*CUDA, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	p := &l.probe
	fail := func(call string, rc int32) error { return fmt.Errorf("cuda: %s: %s", call, l.driver.ErrorText(rc)) }
	c := &CUDA{}
	var dev int32
	if rc := p.cuDeviceGet(&dev, 0); rc != 0 {
		return nil, fail("cuDeviceGet", rc)
	}
	if c.device, c.cc, err = p.Identify(&l.driver, dev, attrComputeMajor, attrComputeMinor); err != nil {
		return nil, err
	}
	if c.cc[0] != 9 {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; sm_90 code needs 9.x", c.device, c.cc[0], c.cc[1])
	}
	var ctx uintptr
	if rc := p.cuDevicePrimaryCtxRetain(&ctx, dev); rc != 0 {
		return nil, fail("cuDevicePrimaryCtxRetain", rc)
	}
	d := l.driver
	// The driver's current context is per thread.
	d.MakeCurrent = func() int32 { return p.cuCtxSetCurrent(ctx) }
	// The SM count, for the residency of grid-barrier launches (0 when the
	// driver does not say: they take their fallback).
	var sms int32
	if p.DeviceGetAttribute(&sms, attrMultiprocessors, dev) != 0 {
		sms = 0
	}
	b, err := gpu.New(&d, gpu.Config{Target: Target, Objects: cubins, Release: func() { p.cuDevicePrimaryCtxRelease(dev) },
		Multiprocessors: int(sms)})
	if err != nil {
		p.cuDevicePrimaryCtxRelease(dev)
		return nil, err
	}
	c.Backend = b
	return c, nil
}

// Device names the GPU and its compute capability, e.g. "NVIDIA H200 (sm_90)".
func (c *CUDA) Device() string { return fmt.Sprintf("%s (sm_%d%d)", c.device, c.cc[0], c.cc[1]) }
