package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// TestPersistentDecodeOption: --persistent-decode marks every maximal run
// of two or more eligible decode launches with one decode_persistent
// kernel whose members are exactly the runs' kernels; the launches stay as
// they were, no prefill launch is marked, and a plan without the option has
// none. The cpu target refuses it.
func TestPersistentDecodeOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, target := range []plan.Target{plan.SM90, plan.GFX1151} {
		o := Options{Target: target, Buckets: []int{4}, ContextTokens: 64}
		base, err := Plan(m, o)
		if err != nil {
			t.Fatal(err)
		}
		o.PersistentDecode = true
		p, err := Plan(m, o)
		if err != nil {
			t.Fatal(err)
		}
		var stream *plan.Kernel
		for i := range p.Kernels {
			if p.Kernels[i].Family == string(ir.DecodePersistent) {
				if stream != nil {
					t.Fatalf("%s: two decode_persistent kernels", target)
				}
				stream = &p.Kernels[i]
			}
		}
		if stream == nil {
			t.Fatalf("%s: no decode_persistent kernel", target)
		}
		byName := map[string]*plan.Kernel{}
		for i := range p.Kernels {
			byName[p.Kernels[i].Name] = &p.Kernels[i]
		}
		members := map[string]bool{}
		longest := 0
		for pi, ph := range p.Phases {
			// The launches are the plan's without the option, but for the mark.
			var unmarked []plan.Launch
			for _, l := range ph.Launches {
				l.Stream = ""
				unmarked = append(unmarked, l)
			}
			if diff := cmp.Diff(base.Phases[pi].Launches, unmarked); diff != "" {
				t.Errorf("%s, phase %s: launches differ from the plan's without the option (-without +with):\n%s", target, ph.Name, diff)
			}
			for i := 0; i < len(ph.Launches); {
				l := &ph.Launches[i]
				k := byName[l.Kernel]
				eligible := kernels.Persistent(ir.Kind(k.Family)) && l.Block[0] == target.Launch().Threads && len(l.Fallback) == 0
				if l.Stream == "" {
					// An eligible launch is left alone only beside no other.
					next := i+1 < len(ph.Launches) && ph.Launches[i+1].Stream == "" && kernels.Persistent(ir.Kind(byName[ph.Launches[i+1].Kernel].Family)) &&
						ph.Launches[i+1].Block[0] == target.Launch().Threads && len(ph.Launches[i+1].Fallback) == 0
					if ph.Kind.Decode() && eligible && next {
						t.Errorf("%s, phase %s: launches %d and %d (%s, %s) could run as a persistent run", target, ph.Name, i, i+1, l.Kernel, ph.Launches[i+1].Kernel)
					}
					i++
					continue
				}
				if !ph.Kind.Decode() {
					t.Errorf("%s, phase %s: launch %d marked outside a decode step", target, ph.Name, i)
				}
				j := i
				for j < len(ph.Launches) && ph.Launches[j].Stream != "" {
					if ph.Launches[j].Stream != stream.Name || !kernels.Persistent(ir.Kind(byName[ph.Launches[j].Kernel].Family)) {
						t.Errorf("%s, phase %s: launch %d (%s) marked %q", target, ph.Name, j, ph.Launches[j].Kernel, ph.Launches[j].Stream)
					}
					members[ph.Launches[j].Kernel] = true
					j++
				}
				if j-i < 2 {
					t.Errorf("%s, phase %s: a run of one launch at %d", target, ph.Name, i)
				}
				longest = max(longest, j-i)
				i = j
			}
		}
		var want []string
		for m := range members {
			want = append(want, m)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, stream.Members); diff != "" {
			t.Errorf("%s: members (-runs' kernels +declared):\n%s", target, diff)
		}
		if got := stream.Params.Int("max_launches"); got != longest {
			t.Errorf("%s: max_launches %d, the longest run %d", target, got, longest)
		}
	}
	_, err := Plan(m, Options{Target: plan.CPU, Buckets: []int{4}, ContextTokens: 64, PersistentDecode: true})
	if err == nil || !strings.Contains(err.Error(), "persistent decode needs a GPU target") {
		t.Errorf("cpu target: %v, want the GPU-target error", err)
	}
}
