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
func launchFor(op *ir.Op, tokens int, t plan.Target) (grid, block []int, shared int, err error) {
	f, err := kernels.Families.Family(op.Kind)
	if err != nil {
		return nil, nil, 0, err
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
			return nil, nil, 0, fmt.Errorf("%s: launch rule gives grid %v, block %v", op.Kind, s.Grid, s.Block)
		}
	}
	if threads > c.Threads || s.SharedBytes < 0 || s.SharedBytes > c.MaxSharedBytes {
		return nil, nil, 0, fmt.Errorf("%s: launch of %d threads and %d shared bytes exceeds %s's %d and %d",
			op.Kind, threads, s.SharedBytes, t, c.Threads, c.MaxSharedBytes)
	}
	return s.Grid[:], s.Block[:], s.SharedBytes, nil
}
