package runtime

import (
	"fmt"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The GPU backends launch kernels with the kernel ABI (plan.KernelABI);
// what follows is the part of a launch that does not depend on the vendor
// driver, so the CUDA and HIP backends build it the same way.

// MaxKernelArgs bounds a kernel's arguments: its operands, n and the
// parameter block's address.
const MaxKernelArgs = 32

// KernelFamily is the declaration of a plan kernel's family.
func KernelFamily(k *plan.Kernel) (*ir.Family, error) {
	return kernels.Families.Family(ir.Kind(k.Family))
}

// KernelArgs checks a launch's operands against its family's signature and
// returns the argument values in ABI order: one device address per operand
// (addr resolves a Ref; each must be 16-byte aligned), then rows, then the
// parameter block's address. Errors name the kernel and operand.
func KernelArgs(k *plan.Kernel, args []Ref, rows int, block uint64, addr func(Ref) (uint64, error)) ([]uint64, error) {
	sig, err := KernelFamily(k)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", k.Name, err)
	}
	if len(args) != len(sig.Operands) {
		return nil, fmt.Errorf("kernel %s: %d arguments, family %s takes %d operands", k.Name, len(args), k.Family, len(sig.Operands))
	}
	if len(args)+2 > MaxKernelArgs {
		return nil, fmt.Errorf("kernel %s: %d operands; at most %d fit", k.Name, len(args), MaxKernelArgs-2)
	}
	vals := make([]uint64, 0, len(args)+2)
	for i, a := range args {
		p, err := addr(a)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: argument %d (%s): %w", k.Name, i, sig.Operands[i].Name, err)
		}
		if p%plan.ArgAlign != 0 {
			return nil, fmt.Errorf("kernel %s: argument %d (%s) at offset %d is not %d-byte aligned", k.Name, i, sig.Operands[i].Name, a.Offset, plan.ArgAlign)
		}
		vals = append(vals, p)
	}
	return append(vals, uint64(uint32(int32(rows))), block), nil
}

// LaunchShape reads a launch's grid and block, padding missing dimensions
// with 1.
func LaunchShape(l *plan.Launch) (grid, block [3]uint32, err error) {
	if len(l.Grid) == 0 || len(l.Block) == 0 || len(l.Grid) > 3 || len(l.Block) > 3 {
		return grid, block, fmt.Errorf("launch has grid %v and block %v; want 1 to 3 dimensions each", l.Grid, l.Block)
	}
	for i := range 3 {
		grid[i], block[i] = 1, 1
		if i < len(l.Grid) {
			if l.Grid[i] <= 0 {
				return grid, block, fmt.Errorf("grid %v has an empty dimension", l.Grid)
			}
			grid[i] = uint32(l.Grid[i])
		}
		if i < len(l.Block) {
			if l.Block[i] <= 0 {
				return grid, block, fmt.Errorf("block %v has an empty dimension", l.Block)
			}
			block[i] = uint32(l.Block[i])
		}
	}
	if l.SharedBytes < 0 {
		return grid, block, fmt.Errorf("negative shared memory %d", l.SharedBytes)
	}
	if l.Cluster < 0 || l.Cluster > 1 && grid[0]%uint32(l.Cluster) != 0 {
		return grid, block, fmt.Errorf("clusters of %d blocks do not divide grid %v", l.Cluster, l.Grid)
	}
	return grid, block, nil
}

// PackArgs writes vals into a pinned host block of 2·MaxKernelArgs words —
// the values first, then a pointer to each — and returns the address of
// the pointer array, the kernelParams a driver launch takes. The block is
// driver-allocated memory, so no Go pointer reaches the driver.
func PackArgs(pinned unsafe.Pointer, vals []uint64) unsafe.Pointer {
	slots := unsafe.Slice((*uint64)(pinned), 2*MaxKernelArgs)
	base := uint64(uintptr(pinned))
	for i, v := range vals {
		slots[i] = v
		slots[MaxKernelArgs+i] = base + uint64(8*i)
	}
	return unsafe.Add(pinned, 8*MaxKernelArgs)
}
