package hipcc

import (
	"fmt"
	"slices"
)

// Command returns the argument list (argv[0] is c.Path) that compiles one
// source file src to the code object out for target t, with the user flags
// appended last so they can override the defaults. It fails when the compiler
// cannot build for t (nvcc for gfx1151, hipcc or clang for sm_90).
func (c *Compiler) Command(t Target, src, out string, user []string) ([]string, error) {
	var args []string
	switch {
	case t == GFX1151 && c.Kind == KindClang:
		args = []string{c.Path, "-x", "hip", "--offload-arch=" + string(t), "--cuda-device-only",
			"--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3"}
		if c.Major() >= 22 {
			args = append(args, "-mcode-object-version=5")
		}
		args = append(args, "-c", src, "-o", out)
	case t == GFX1151 && c.Kind == KindHIPCC:
		args = []string{c.Path, "--offload-arch=" + string(t), "--genco", "-O3", src, "-o", out}
	case t == SM90 && c.Kind == KindNVCC:
		args = []string{c.Path, "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v", src, "-o", out}
	case !t.GPU():
		return nil, fmt.Errorf("hipcc: unknown target %q", t)
	default:
		return nil, fmt.Errorf("hipcc: %s (%s) cannot compile for %s", c.Kind, c.Path, t)
	}
	return append(args, slices.Clone(user)...), nil
}

// SyntaxCheckCUDACommand returns the clang command that runs clang's CUDA
// front end and NVPTX back end on a self-contained CUDA source, writing PTX;
// it checks generated CUDA kernels on machines without a CUDA install.
func (c *Compiler) SyntaxCheckCUDACommand(src, out string, user []string) ([]string, error) {
	if c.Kind != KindClang {
		return nil, fmt.Errorf("hipcc: the CUDA syntax check needs clang, not %s (%s)", c.Kind, c.Path)
	}
	args := []string{c.Path, "-x", "cuda", "--cuda-gpu-arch=sm_90a", "--cuda-device-only",
		"-nocudainc", "-nocudalib", "-O3", "-S", src, "-o", out}
	return append(args, slices.Clone(user)...), nil
}
