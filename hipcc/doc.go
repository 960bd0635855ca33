// Package hipcc drives the device compilers that turn rendered GPU kernel
// sources into loadable code objects.
//
// It knows nothing of models: it finds a compiler for a target (hipcc or
// clang++ with lld for AMD gfx1151, nvcc for NVIDIA sm_90), builds the exact
// command lines, splits user flags with shell quoting rules, compiles many
// sources in parallel through a content-addressed cache, reads each object's
// resource report (llvm-readelf notes on AMD, ptxas -v on NVIDIA) and maps
// compile errors and register spills back to kernel names.
//
// The sources it compiles are self-contained (no vendor headers), so the AMD
// path runs with a plain distribution clang (-nogpulib -nogpuinc) and clang's
// CUDA front end can check CUDA sources without a CUDA install.
package hipcc
