package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// persistDecode marks the runs of a GPU plan's decode steps that one
// decode_persistent launch may run (Options.PersistentDecode,
// docs/persistent.md): every maximal run of two or more consecutive
// launches whose family can run as a persistent item (kernels.Persistent),
// on the target's 1-D block, with no fallback, cluster or operand offset
// that moves with a slot (a longer run than kernels.MaxPersistentLaunches is
// split). One kernel serves every run of the plan: its
// members are the runs' kernels, by name. The launches themselves stay as
// they are, the oracle: an engine that does not run the kernel launches
// them one by one.
func persistDecode(p *plan.Plan, threads int) error {
	byName := map[string]*plan.Kernel{}
	for i := range p.Kernels {
		byName[p.Kernels[i].Name] = &p.Kernels[i]
	}
	eligible := func(l *plan.Launch) bool {
		k := byName[l.Kernel]
		if k == nil || !kernels.Persistent(ir.Kind(k.Family)) || len(l.Fallback) > 0 || l.Cluster > 1 {
			return false
		}
		if len(l.Block) == 0 || l.Block[0] != threads || slices.ContainsFunc(l.Block[1:], func(d int) bool { return d != 1 }) {
			return false
		}
		return !slices.ContainsFunc(l.Args, func(a plan.Arg) bool { return a.Dyn != nil })
	}
	type run struct{ phase, from, to int }
	var runs []run
	longest := 0
	members := map[string]bool{}
	for pi := range p.Phases {
		ph := &p.Phases[pi]
		if !ph.Kind.Decode() {
			continue
		}
		for i := 0; i < len(ph.Launches); {
			j := i
			for j < len(ph.Launches) && j-i < kernels.MaxPersistentLaunches && eligible(&ph.Launches[j]) {
				j++
			}
			if j-i >= 2 {
				runs = append(runs, run{pi, i, j})
				longest = max(longest, j-i)
				for _, l := range ph.Launches[i:j] {
					members[l.Kernel] = true
				}
			}
			if j-i == kernels.MaxPersistentLaunches {
				j++ // the launch after a run cut at the limit stays unmarked: runs are told apart by their marks
			}
			i = max(j, i+1)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	names := make([]string, 0, len(members))
	for m := range members {
		names = append(names, m)
	}
	slices.Sort(names)
	h := sha256.Sum256([]byte(strings.Join(names, ",")))
	k := plan.Kernel{Name: fmt.Sprintf("%s_%s", ir.DecodePersistent, hex.EncodeToString(h[:4])), Family: string(ir.DecodePersistent),
		Params: ir.Params{Ints: map[string]int64{"max_launches": int64(longest)}}, Members: names}
	if byName[k.Name] != nil {
		return fmt.Errorf("decode_persistent kernel %s is already in the plan", k.Name)
	}
	p.Kernels = append(p.Kernels, k)
	for _, r := range runs {
		for i := r.from; i < r.to; i++ {
			p.Phases[r.phase].Launches[i].Stream = k.Name
		}
	}
	return nil
}
