package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// launchFor is the launch shape of an op over a bucket of rows on a GPU
// target: the family's launch rule with the target's launch configuration,
// held to that configuration (block within its threads, shared memory
// within its budget).
// maxBlockThreads is the threads of a block both GPU targets take.
const maxBlockThreads = 1024

func launchFor(op *ir.Op, tokens int, t plan.Target) (ir.LaunchShape, error) {
	f, err := kernels.Families.Family(op.Kind)
	if err != nil {
		return ir.LaunchShape{}, err
	}
	rows := tokens
	if op.Rows == nil {
		r, _ := op.Params.Rows()
		rows = int(r)
	}
	c := t.Launch()
	s := f.Launch(op.Params, rows, c)
	threads := s.Block[0] * s.Block[1] * s.Block[2]
	for i := range 3 {
		if s.Grid[i] < 1 || s.Block[i] < 1 {
			return ir.LaunchShape{}, fmt.Errorf("%s: launch rule gives grid %v, block %v", op.Kind, s.Grid, s.Block)
		}
	}
	// c.Threads is the families' usual block; a rule may ask for more (the
	// warp-specialized tile's three warpgroups), up to a block's limit.
	if threads > maxBlockThreads || s.SharedBytes < 0 || s.SharedBytes > c.MaxSharedBytes {
		return ir.LaunchShape{}, fmt.Errorf("%s: launch of %d threads and %d shared bytes exceeds %s's %d and %d",
			op.Kind, threads, s.SharedBytes, t, maxBlockThreads, c.MaxSharedBytes)
	}
	if d, _ := t.Dialect(); s.Cluster > 1 && (d != plan.CUDA || s.Grid[0]%s.Cluster != 0) {
		return ir.LaunchShape{}, fmt.Errorf("%s: launch rule gives clusters of %d blocks over grid %v on %s (clusters are sm_90's, and divide the grid's x)",
			op.Kind, s.Cluster, s.Grid, t)
	}
	return s, nil
}
