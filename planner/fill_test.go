package planner

import (
	"bytes"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestFillKernels: every target's plan lists one fill_uniform kernel per
// weight dtype (bf16 matrices, f32 small parameters), which no phase
// launches (the weight loader does), and such a plan validates and
// survives the file format.
func TestFillKernels(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, target := range plan.Targets {
		p, err := Plan(m, Options{Target: target, Buckets: []int{4, 16}, ContextTokens: 64})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		fills := map[bool]string{}
		for _, k := range p.Kernels {
			if ir.Kind(k.Family) != ir.FillUniform {
				continue
			}
			if k.Params.Len() != 1 || !slices.Contains(k.Params.Names(), "bf16") {
				t.Errorf("%s: %s has parameters %v, want just bf16", target, k.Name, k.Params)
			}
			if old, ok := fills[k.Params.Flag("bf16")]; ok {
				t.Errorf("%s: %s and %s fill the same dtype", target, old, k.Name)
			}
			fills[k.Params.Flag("bf16")] = k.Name
		}
		if len(fills) != 2 || fills[false] == "" || fills[true] == "" {
			t.Errorf("%s: fill kernels %v, want one for bf16 and one for f32", target, fills)
		}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				if l.Kernel == fills[false] || l.Kernel == fills[true] {
					t.Errorf("%s: phase %s launches %s", target, ph.Name, l.Kernel)
				}
			}
		}
		back, err := plan.Decode(bytes.NewReader(p.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if !bytes.Equal(back.Bytes(), p.Bytes()) {
			t.Errorf("%s: decode/encode changes the plan", target)
		}
	}
}
