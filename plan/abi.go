package plan

// KernelABI is the version of the calling convention between the GPU code
// objects `aimac build` compiles and the runtime that launches them. A bundle
// records the ABI its kernels were rendered for, and an engine opens only
// bundles of its own ABI; within one ABI, a bundle built by any release of
// the compiler runs, whatever its templates rendered.
//
// ABI 4 (ABI 1 had a 16-slot block without the step's shape; ABI 2 had no
// sample mask: the sample family's mask operand and the masked slot, 18,
// for constrained decoding; ABI 3 kernels did not wait for the launch
// before them, so they could not be launched with programmatic
// serialization) covers:
//
//   - the argument order of every entry point: one device pointer per
//     operand of the kernel's family, in the family's operand order (the
//     plan's launch arguments, which the runtime binds positionally), then
//     `int n` (the launch's logical rows), then `const int* params`;
//
//   - the parameter block that params points at: ir.ParamSlots (32) int32
//     slots with the layout of the ir.Slot constants (floats as IEEE-754
//     bits; n, last and row0 at 15-17, masked at 18),
//     written by the host before a launch or a graph replay and read by the
//     kernels at run time;
//
//   - the alignment rule: every operand pointer is a multiple of ArgAlign
//     bytes (kernels use 16-byte vector loads);
//
//   - the launch: the plan's grid, block and shared memory bytes, nothing
//     else;
//
//   - programmatic dependent launch: every entry point waits for the launches
//     before it (griddepcontrol.wait on sm_90, PDL_WAIT in the prelude)
//     before it reads anything but weights, the parameter block and what a
//     launch two or more before it wrote (complete by then: every entry point
//     lets its dependants start only after its own wait; moe_decode_down's
//     early_ids reads the router's ids so) and before it writes, so the
//     runtime may launch any of them with programmatic stream serialization
//     (docs/pdl.md).
//
//   - the row count: a negative n names the parameter slot holding it
//     (slot −n−1), read by the entry point's first statement, so a captured
//     prefill graph serves every segment length (ABI 5).
//
// Change any of these and KernelABI must change with them (plan's tests pin
// the parameter block of each ABI).
const KernelABI = 5

// ArgAlign is the byte alignment of every kernel operand pointer (see
// KernelABI).
const ArgAlign = 16
