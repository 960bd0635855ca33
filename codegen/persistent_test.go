package codegen

import (
	"strings"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestRenderPersistentRefuses: a decode_persistent kernel renders only with
// a plan that holds its members, each of a family that can run as an item;
// Render alone refuses it.
func TestRenderPersistentRefuses(t *testing.T) {
	var p *plan.Plan
	for _, op := range optionPlans(t) {
		for _, k := range op.Kernels {
			if ir.Kind(k.Family) == ir.DecodePersistent && op.Target == plan.SM90 {
				p = op
			}
		}
	}
	if p == nil {
		t.Fatal("no sm_90 option plan has a decode_persistent kernel")
	}
	var k plan.Kernel
	for _, pk := range p.Kernels {
		if ir.Kind(pk.Family) == ir.DecodePersistent {
			k = pk
		}
	}
	if _, err := RenderPersistent(p, k); err != nil {
		t.Fatalf("the plan's kernel: %v", err)
	}
	var gemm string
	for _, pk := range p.Kernels {
		if pk.Family == string(ir.GEMM) {
			gemm = pk.Name
		}
	}
	for _, tc := range []struct {
		name    string
		members []string
		want    string
	}{
		{"unknown member", append([]string{"nope"}, k.Members...), "member nope is not a plan kernel"},
		{"no item family", append([]string{gemm}, k.Members...), "family gemm cannot run as a persistent item"},
		{"no members", nil, "lists no members"},
	} {
		bad := k
		bad.Members = tc.members
		if _, err := RenderPersistent(p, bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Render(p.Target, k); err == nil || !strings.Contains(err.Error(), "renders with the plan") {
		t.Errorf("Render alone: %v", err)
	}
	src, _ := RenderPersistent(p, k)
	for _, m := range k.Members {
		if !strings.Contains(src.Code, "::"+m+"(") {
			t.Errorf("the source never calls member %s", m)
		}
	}
}
