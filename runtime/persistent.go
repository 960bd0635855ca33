package runtime

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// PersistentBackend is a backend that runs decode_persistent kernels
// (docs/persistent.md): its launches pass KernelArgs' values, which it
// gives for a launch without making it, so that an item table can hold
// them, and it says how many blocks of a kernel its device holds at once,
// the grid of a persistent launch. The engine runs a plan's persistent runs
// only on a backend that is one.
type PersistentBackend interface {
	ArgValues(k *plan.Kernel, args []Ref, rows int) ([]uint64, error)
	// ResidentBlocks is the blocks of k, of threads threads and shared
	// bytes of dynamic shared memory, resident at once (0: unknown; −1:
	// none fits).
	ResidentBlocks(k *plan.Kernel, threads, shared int) (int, error)
}

// persistentRun is a run of a phase's launches [from, to) that one launch
// of a decode_persistent kernel runs: its item table and sync block, made
// once when the engine is built.
type persistentRun struct {
	from, to int
	kernel   *plan.Kernel
	launch   plan.Launch
	table    Mem
	sync     Mem
}

// buildPersistent finds the runs of ph's launches that name a
// decode_persistent kernel (plan.Launch.Stream) and writes each run's item
// table. Operand offsets of such launches never move with a slot
// (plan.Validate); a row count from a slot is passed as the slot
// (−slot−1), which every entry point reads at run time (KernelABI 5).
func (e *Engine) buildPersistent(r *phase, kernels map[string]*plan.Kernel) error {
	av, ok := e.be.(PersistentBackend)
	if !ok {
		return nil
	}
	ls := r.p.Launches
	for i := 0; i < len(ls); {
		name := ls[i].Stream
		if name == "" {
			i++
			continue
		}
		j := i
		for j < len(ls) && ls[j].Stream == name {
			j++
		}
		run, err := e.persistentRun(av, r, kernels[name], i, j)
		if err != nil {
			return fmt.Errorf("phase %s: launches %d to %d (stream %s): %w", r.p.Name, i, j-1, name, err)
		}
		if r.runs == nil {
			r.runs = map[int]*persistentRun{}
		}
		r.runs[i] = run
		e.persistentMems = append(e.persistentMems, run.table, run.sync)
		i = j
	}
	return nil
}

func (e *Engine) persistentRun(av PersistentBackend, r *phase, k *plan.Kernel, from, to int) (*persistentRun, error) {
	if k == nil || ir.Kind(k.Family) != ir.DecodePersistent {
		return nil, fmt.Errorf("no %s kernel of that name", ir.DecodePersistent)
	}
	member := map[string]int{}
	for i, m := range k.Members {
		member[m] = i
	}
	n := to - from
	if limit := k.Params.Int("max_launches"); n > limit {
		return nil, fmt.Errorf("%d launches; kernel %s runs at most %d", n, k.Name, limit)
	}
	words := make([]uint64, kernels.PersistentTableWords(n))
	items, shared, threads := 0, 0, 0
	for i := from; i < to; i++ {
		l := &r.p.Launches[i]
		m, ok := member[l.Kernel]
		if !ok {
			return nil, fmt.Errorf("kernel %s is not one of its members", l.Kernel)
		}
		grid, block, err := LaunchShape(l)
		if err != nil {
			return nil, fmt.Errorf("launch %d (%s): %w", i, l.Kernel, err)
		}
		if grid[2] != 1 || block[1] != 1 || block[2] != 1 {
			return nil, fmt.Errorf("launch %d (%s): grid %v, block %v: a persistent run's items are 2-D grids of 1-D blocks", i, l.Kernel, l.Grid, l.Block)
		}
		if threads == 0 {
			threads = int(block[0])
		} else if int(block[0]) != threads {
			return nil, fmt.Errorf("launch %d (%s): %d threads a block, the run's others %d", i, l.Kernel, block[0], threads)
		}
		var refs []Ref
		rows, err := e.bind(r, i, true, &refs)
		if err != nil {
			return nil, err
		}
		vals, err := av.ArgValues(r.kernels[i], refs, rows)
		if err != nil {
			return nil, fmt.Errorf("launch %d: %w", i, err)
		}
		if len(vals) > kernels.PersistentArgs {
			return nil, fmt.Errorf("launch %d (%s): %d arguments, a record holds %d", i, l.Kernel, len(vals), kernels.PersistentArgs)
		}
		rec := words[kernels.PersistentHeader+(i-from)*kernels.PersistentRecord:]
		rec[0], rec[1], rec[2], rec[3] = uint64(m), uint64(grid[0]), uint64(grid[1]), uint64(items)
		copy(rec[4:], vals)
		items += int(grid[0]) * int(grid[1])
		shared = max(shared, l.SharedBytes)
	}
	if items >= 1<<31-1 {
		return nil, fmt.Errorf("%d items: more than a launch's grid holds", items)
	}
	words[0], words[1] = uint64(n), uint64(items)
	raw := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(raw[8*i:], w)
	}
	table, err := e.be.Alloc(int64(len(raw)))
	if err != nil {
		return nil, fmt.Errorf("item table: %w", err)
	}
	if err := e.be.Upload(Ref{Mem: table}, raw); err != nil {
		e.be.Free(table)
		return nil, fmt.Errorf("item table: %w", err)
	}
	syncBytes := int64(4 * kernels.PersistentSyncInts(n))
	sync, err := e.be.Alloc(syncBytes)
	if err == nil {
		err = e.be.Zero(Ref{Mem: sync}, syncBytes)
	}
	if err != nil {
		e.be.Free(table)
		if sync != nil {
			e.be.Free(sync)
		}
		return nil, fmt.Errorf("sync block: %w", err)
	}
	// As many blocks as the device holds at once, each looping over items
	// (more would only wait for a multiprocessor to free).
	blocks := items
	resident, err := av.ResidentBlocks(k, threads, shared)
	if err == nil && resident < 0 {
		err = fmt.Errorf("kernel %s: the device holds no block of %d threads and %d bytes of shared memory", k.Name, threads, shared)
	}
	if err != nil {
		e.be.Free(table)
		e.be.Free(sync)
		return nil, err
	}
	if resident > 0 {
		blocks = min(blocks, resident)
	}
	first := &r.p.Launches[from]
	return &persistentRun{from: from, to: to, kernel: k, table: table, sync: sync,
		launch: plan.Launch{Kernel: k.Name, Layer: first.Layer, Grid: []int{blocks, 1, 1}, Block: []int{threads, 1, 1}, SharedBytes: shared}}, nil
}

// SetPersistent chooses whether the decode steps run their persistent runs
// as one launch each (on by default where the plan has them and the
// backend writes item tables) or launch by launch, the oracle. The step
// graphs are captured again.
func (e *Engine) SetPersistent(on bool) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return
	}
	defer end()
	if on != e.persistentOn {
		e.dropGraphs()
		e.persistentOn = on
	}
}

// Persistent reports how many runs of the decode steps' launches the
// engine launches as one persistent launch each, and the launches they
// hold (0, 0 when it runs them launch by launch).
func (e *Engine) Persistent() (runs, launches int) {
	if !e.persistentOn {
		return 0, 0
	}
	for _, ph := range []*phase{e.decode, e.greedy} {
		if ph == nil {
			continue
		}
		for _, r := range ph.runs {
			runs++
			launches += r.to - r.from
		}
	}
	return runs, launches
}
