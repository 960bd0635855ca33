package codegen

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// Resource budgets of a gfx1151 kernel: no scratch (spills or private
// arrays), at most 256 VGPRs per lane (wave32), at most 64 KiB of LDS.
const (
	maxVGPRs = 256
	maxLDS   = 64 << 10
)

// clang finds clang-19 (with lld and llvm-readelf); a missing one fails the
// test rather than skipping it, since CI relies on this check.
func clang(t *testing.T) *hipcc.Compiler {
	t.Helper()
	c, err := hipcc.FindClang()
	if err != nil {
		t.Fatalf("%v\ninstall clang-19 lld-19 llvm-19 (apt-get install -y clang-19 lld-19 llvm-19)", err)
	}
	return c
}

// uniqueSources renders the target's frozen plan and the option plans of
// that target (the families only an option reaches: the tensor-core ones,
// the streamed decode attention, the unfused decode MoE, gdn_decode_step)
// and keeps one source per distinct code, with every plan kernel that
// rendered to it.
func uniqueSources(t *testing.T, target plan.Target) ([]hipcc.Source, map[string][]string, map[string]string) {
	t.Helper()
	ps := []*plan.Plan{frozen(t, target)}
	if target == plan.GFX1151 {
		ps = append(ps, oracleGPUPlan(t))
	}
	for _, p := range optionPlans(t) {
		if p.Target == target {
			ps = append(ps, p)
		}
	}
	var srcs []Source
	for _, p := range ps {
		s, err := RenderPlan(p)
		if err != nil {
			t.Fatalf("%s: %v", p.Target, err)
		}
		srcs = append(srcs, s...)
	}
	byHash := map[string]string{}
	same := map[string][]string{}
	family := map[string]string{}
	var out []hipcc.Source
	for _, s := range srcs {
		if first, ok := byHash[s.Hash]; ok {
			same[first] = append(same[first], s.Kernel)
			continue
		}
		byHash[s.Hash] = s.Kernel
		family[s.Kernel] = s.Family
		out = append(out, hipcc.Source{Name: s.Kernel, Code: s.Code})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, same, family
}

// TestCompileGfx1151 compiles every kernel of the gfx1151 plans to a
// code object with clang-19 (no device libraries, no headers) and checks
// the resource report: no scratch, VGPRs and LDS within budget. go test -v
// prints the budget table.
func TestCompileGfx1151(t *testing.T) {
	c := clang(t)
	srcs, same, family := uniqueSources(t, "gfx1151")
	results, err := c.Compile(context.Background(), hipcc.GFX1151, srcs, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %5s %5s %7s %7s  %s\n", "kernel", "vgpr", "sgpr", "lds", "scratch", "family")
	maxV, kernels := 0, 0
	for _, r := range results {
		kernels += 1 + len(same[r.Name])
		if r.Object == nil {
			t.Errorf("%s: no code object\n%s", r.Name, r.Log)
			continue
		}
		if _, ok := r.Kernels[r.Name]; !ok {
			t.Errorf("%s: the code object has no kernel of that name", r.Name)
		}
		res := r.Resources
		maxV = max(maxV, res.VGPRs)
		fmt.Fprintf(&table, "%-32s %5d %5d %7d %7d  %s\n", r.Name, res.VGPRs, res.SGPRs, res.LDSBytes, res.ScratchBytes, family[r.Name])
		if why := res.Spills(); why != "" || res.ScratchBytes != 0 {
			t.Errorf("%s: uses scratch: %s (private segment %d bytes)", r.Name, why, res.ScratchBytes)
		}
		if res.VGPRs == 0 || res.VGPRs > maxVGPRs {
			t.Errorf("%s: %d VGPRs, budget %d", r.Name, res.VGPRs, maxVGPRs)
		}
		if res.LDSBytes > maxLDS {
			t.Errorf("%s: %d bytes of LDS, budget %d", r.Name, res.LDSBytes, maxLDS)
		}
		if strings.Contains(r.Log, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", r.Name, r.Log)
		}
	}
	t.Logf("gfx1151: %d plan kernels, %d distinct sources, all compiled; max %d VGPRs (budget %d), LDS budget %d bytes, no scratch allowed\n%s",
		kernels, len(results), maxV, maxVGPRs, maxLDS, table.String())
}

// TestCompileSm90 parses and compiles every kernel of the sm_90 plans
// to PTX with clang-19's CUDA front end (no CUDA headers or libdevice) and
// checks each PTX file defines the kernel's entry point.
func TestCompileSm90(t *testing.T) {
	c := clang(t)
	srcs, _, _ := uniqueSources(t, "sm_90")
	results, err := c.SyntaxCheckCUDA(context.Background(), srcs, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if !bytes.Contains(r.Object, []byte(".entry "+r.Name)) {
			t.Errorf("%s: no .entry %s in the PTX\n%s", r.Name, r.Name, r.Log)
		}
		if strings.Contains(r.Log, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", r.Name, r.Log)
		}
	}
	t.Logf("sm_90: %d distinct sources compiled to PTX", len(results))
}
