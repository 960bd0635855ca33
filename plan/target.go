package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/ir"
)

// Target is a machine a plan is made for.
type Target string

// The targets the planner can plan for.
const (
	CPU     Target = "cpu"     // the Go reference kernels
	SM90    Target = "sm_90"   // NVIDIA H100/H200, compiled as sm_90a
	GFX1151 Target = "gfx1151" // AMD Radeon 8060S (RDNA 3.5, wave32)
)

// Targets lists every target, in a fixed order.
var Targets = []Target{CPU, SM90, GFX1151}

// Dialect is a GPU source language.
type Dialect string

const (
	CUDA Dialect = "cuda" // sm_90, compiled by nvcc (or parsed by clang)
	HIP  Dialect = "hip"  // gfx1151, compiled by hipcc or clang
)

// SourceExt is the source file extension of the dialect.
func (d Dialect) SourceExt() string {
	if d == CUDA {
		return ".cu"
	}
	return ".hip"
}

// TargetSpec is what a target is: the one place its dialect, code objects,
// device compiler and launch configuration are spelled.
type TargetSpec struct {
	Dialect   Dialect // "" on the CPU
	ObjectExt string  // code-object file extension
	Compiler  string  // the device compiler driver that makes its objects
	// Launch is the configuration the families' launch rules consult.
	Launch ir.LaunchConfig
	// Programmatic: the device runs launches with programmatic stream
	// serialization (programmatic dependent launch, sm_90), which the
	// runtime uses for the decode step's graph (docs/pdl.md).
	Programmatic bool
}

// targets is the per-target table. Both GPUs run 256-thread blocks of
// 32-lane warps (gfx1151 in wave32), so one template serves both dialects;
// sm_90's shared memory is the 227 KiB a block may use with the dynamic
// shared-memory opt-in (the runtime raises a kernel's limit; static arrays
// stay within 48 KiB), gfx1151's the 64 KiB of LDS a workgroup may use;
// tiled loops pipeline 4 stages on sm_90 (cp.async) and 2 on gfx1151 (its
// copies are loads and stores, and 64 KiB holds two); the H100 and H200
// have 132 SMs, the Radeon 8060S 40 CUs.
var targets = map[Target]TargetSpec{
	CPU:     {},
	SM90:    {Dialect: CUDA, ObjectExt: ".cubin", Compiler: "nvcc", Launch: ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10, Stages: 4, Multiprocessors: 132}, Programmatic: true},
	GFX1151: {Dialect: HIP, ObjectExt: ".hsaco", Compiler: "hipcc", Launch: ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 64 << 10, Stages: 2, Multiprocessors: 40}},
}

// Valid reports whether t is a known target.
func (t Target) Valid() bool { _, ok := targets[t]; return ok }

// Check returns an error naming the known targets when t is not one.
func (t Target) Check() error {
	if !t.Valid() {
		return fmt.Errorf("target %q is not one of %v", string(t), Targets)
	}
	return nil
}

// GPU reports whether t runs compiled kernels.
func (t Target) GPU() bool { return targets[t].Dialect != "" }

// Spec is the target's row of the table (zero for an unknown target).
func (t Target) Spec() TargetSpec { return targets[t] }

// Dialect is the GPU source language of t's kernels, or an error for the
// CPU and unknown targets.
func (t Target) Dialect() (Dialect, error) {
	d := targets[t].Dialect
	if d == "" {
		return "", fmt.Errorf("target %q has no GPU dialect", string(t))
	}
	return d, nil
}

// ObjectExt is the extension of t's code objects, or an error when it has
// none.
func (t Target) ObjectExt() (string, error) {
	e := targets[t].ObjectExt
	if e == "" {
		var names []string
		for _, g := range GPUTargets() {
			names = append(names, string(g))
		}
		slices.Sort(names)
		return "", fmt.Errorf("target %q has no code objects (want %s)", string(t), strings.Join(names, " or "))
	}
	return e, nil
}

// Launch is t's launch configuration (zero on the CPU).
func (t Target) Launch() ir.LaunchConfig { return targets[t].Launch }

// GPUTargets lists the targets with compiled kernels.
func GPUTargets() []Target {
	var out []Target
	for _, t := range Targets {
		if t.GPU() {
			out = append(out, t)
		}
	}
	return out
}

// Programmatic reports whether t's device runs launches with programmatic
// stream serialization (TargetSpec.Programmatic).
func (t Target) Programmatic() bool { return targets[t].Programmatic }
