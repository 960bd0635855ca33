// Package hip is the gfx1151 backend of the runtime: device memory, copies,
// kernel launches and graph capture through the HIP runtime API, on one AMD
// GPU of the RDNA 3 family (gfx11xx; the plans target gfx1151, RDNA 3.5).
// The backend itself is package runtime/gpu, shared with the sm_90 one
// (package runtime/cuda); this package binds the HIP runtime's entry points
// into its driver table and probes the device.
//
// # Why purego
//
// The HIP runtime library (libamdhip64.so, see LibraryNames) is loaded at
// run time with github.com/ebitengine/purego: no cgo, no ROCm headers or
// toolkit at build time, one binary for every machine. Importing the
// package needs nothing; only New (or Open) needs the library. Kernels come
// as code objects (.hsaco) compiled ahead of time, kernel name → bytes (a
// bundle's Objects), so the runtime never runs a compiler.
//
// # What HIP lacks
//
// HIP has no extended launch with CUDA's attributes: launches with
// runtime.LaunchAttrs set are refused (programmatic dependent launch is an
// sm_90 feature), and no event-record nodes are bound (the bench's
// per-family table then times launches one by one). A gfx11 kernel gets up to 64 KB of LDS as dynamic shared
// memory without raising a function attribute.
//
// # Tests
//
// No AMD GPU is needed to test the package: testdata/fakehip.c implements
// every entry point the binding binds over host memory, with the real C
// signatures and enum values. (The shared backend's logic is tested in
// package runtime/gpu against a fake driver in Go.) The tests compile it into a shared object
// with the first C compiler on PATH and load it through Open, the same
// binding a real runtime goes through. The fake cannot compute; it checks
// pointers, bounds and handles, and logs every launch — kernel, grid,
// block, each argument, and the parameter block as the launch reads it —
// so the tests see exactly what a GPU would be asked to run, including what
// a replayed graph reads after new SetParams values, and it can make any
// entry point fail on demand to exercise the error paths.
package hip

import (
	"errors"
	"fmt"

	"github.com/aimaproject/aimac/runtime/gpu"
)

// Target is the plan target this backend runs.
const Target = "gfx1151"

// HIP is a runtime.Backend on one AMD GPU (device 0): the shared GPU
// backend over the HIP runtime.
type HIP struct {
	*gpu.Backend
	lib    *Library
	device string
	cc     [2]int32
}

// New opens device 0 of the default HIP runtime library (see Default).
// objects maps each plan kernel's name to its gfx1151 code object; Load
// checks that the plan's kernels are all there.
func New(objects map[string][]byte) (*HIP, error) {
	l, err := Default()
	if err != nil {
		return nil, err
	}
	return l.New(objects)
}

// New opens device 0 of the library. A device that is not a gfx11 GPU is
// refused.
func (l *Library) New(objects map[string][]byte) (*HIP, error) {
	h := &HIP{lib: l}
	p := &l.probe
	const dev = 0
	fail := func(call string, rc int32) error { return fmt.Errorf("hip: %s: %s", call, l.driver.ErrorText(rc)) }
	var count int32
	if rc := p.hipGetDeviceCount(&count); rc != 0 || count == 0 {
		if rc == 0 {
			return nil, errors.New("hip: no HIP device")
		}
		return nil, fail("hipGetDeviceCount", rc)
	}
	if rc := p.hipSetDevice(dev); rc != 0 {
		return nil, fail("hipSetDevice", rc)
	}
	var err error
	if h.device, h.cc, err = p.Identify(&l.driver, dev, attrComputeMajor, attrComputeMinor); err != nil {
		return nil, err
	}
	if h.cc[0] != 11 {
		return nil, fmt.Errorf("hip: %s reports compute capability %d.%d, not a gfx11 GPU; gfx1151 code objects need gfx11xx (11.x)", h.device, h.cc[0], h.cc[1])
	}
	d := l.driver
	// The runtime's current device is per thread.
	d.MakeCurrent = func() int32 { return p.hipSetDevice(dev) }
	// The CU count, for the residency of grid-barrier launches (0 when the
	// runtime does not say: they take their fallback).
	var cus int32
	if p.DeviceGetAttribute(&cus, attrMultiprocessors, dev) != 0 {
		cus = 0
	}
	b, err := gpu.New(&d, gpu.Config{Target: Target, Objects: objects, Multiprocessors: int(cus)})
	if err != nil {
		return nil, err
	}
	h.Backend = b
	return h, nil
}

// Device names the GPU, its compute capability and the runtime, e.g.
// "AMD Radeon 8060S Graphics (11.5, HIP 6.4.43483)".
func (h *HIP) Device() string {
	return fmt.Sprintf("%s (%d.%d, HIP %s)", h.device, h.cc[0], h.cc[1], h.lib.Version())
}
