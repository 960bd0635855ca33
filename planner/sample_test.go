package planner

import (
	"slices"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// TestSamplePhase: every plan has the sampler: one launch of sample over
// the logits, writing the tokens input and the persistent sampled output,
// with the sampling slots as its dynamic scalars and one block on a GPU.
func TestSamplePhase(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, target := range plan.Targets {
		p, err := Plan(m, Options{Target: target, Buckets: []int{4, 16}, ContextTokens: 64})
		if err != nil {
			t.Fatal(err)
		}
		var ph *plan.Phase
		for i := range p.Phases {
			if p.Phases[i].Kind == plan.Sample {
				ph = &p.Phases[i]
			}
		}
		if ph == nil || len(ph.Launches) != 1 || len(ph.Buffers) != 0 {
			t.Fatalf("%s: sample phase %+v", target, ph)
		}
		if !slices.Equal(ph.Dyn, kernels.Families[ir.Sample].Slots) {
			t.Errorf("%s: dyn %v", target, ph.Dyn)
		}
		l := ph.Launches[0]
		var args []string
		for _, a := range l.Args {
			args = append(args, a.Buffer)
		}
		if !slices.Equal(args, []string{"logits", "tokens", "sampled", "sample_mask"}) {
			t.Errorf("%s: sample(%v)", target, args)
		}
		if target.GPU() && (!slices.Equal(l.Grid, []int{1, 1, 1}) || l.Block[0] != target.Launch().Threads) {
			t.Errorf("%s: grid %v block %v, want one block", target, l.Grid, l.Block)
		}
		for _, b := range p.Buffers {
			if b.Name == "sampled" && (b.Role != ir.Output || b.DType != ir.I32 || b.Bytes != 16) {
				t.Errorf("%s: sampled buffer %+v", target, b)
			}
		}
		for _, k := range p.Kernels {
			if k.Family == string(ir.Sample) && k.Params.Int("vocab") != m.Config.VocabSize {
				t.Errorf("%s: kernel %+v", target, k)
			}
		}
	}
}
