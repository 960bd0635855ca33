// Package plans holds the frozen plans of the real model (Qwen3.6-35B-A3B)
// for its default buckets and context, one per target. A test regenerates
// them and fails on any difference, so a change to the planner shows up as
// a reviewed diff of these files.
package plans

import (
	"embed"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
)

// DefaultContextTokens is the real model's window (SPEC §1.1).
const DefaultContextTokens = 262144

//go:embed *.json
var files embed.FS

// FileName is the frozen plan's file for a target.
func FileName(target plan.Target) string { return arch.RealName + "." + string(target) + ".json" }

// Generate plans the real model for a target with the default buckets.
func Generate(target plan.Target) (*plan.Plan, error) {
	m := planner.FromConfig(arch.RealName, arch.Real())
	return planner.Plan(m, planner.Options{Target: target, Buckets: planner.DefaultBuckets, ContextTokens: DefaultContextTokens})
}

// Frozen returns the checked-in plan bytes for a target.
func Frozen(target plan.Target) ([]byte, error) { return files.ReadFile(FileName(target)) }
