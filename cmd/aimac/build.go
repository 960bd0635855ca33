package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/bundler"
	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// buildCmd is `aimac build`: it only parses flags and hands the plan to
// bundler.Build, which does the rendering, compiling and writing.
func buildCmd() *cobra.Command {
	var planFile, target, out, flags, cacheDir string
	var workers int
	c := &cobra.Command{
		Use:   "build",
		Short: "Compile a plan's kernels and write an engine bundle (plan, code objects, manifest)",
		Long: `Render every kernel of a GPU plan, compile it with the target's device
compiler (nvcc for sm_90; hipcc or clang for gfx1151) and write the engine
bundle that ` + "`aima-engine --bundle`" + ` runs:

  DIR/plan.json              the plan
  DIR/kernels/<kernel>.cubin one code object per kernel (.hsaco for gfx1151)
  DIR/manifest.json          format, kernel ABI, target, plan hash, compiler
                             and flags, each kernel's source hash and resource
                             report, and the size and sha256 of every file

The bundle is written atomically (DIR.tmp, then renamed); --out may be a
missing or empty directory or a previous bundle. An engine opens the bundle
without a compiler: it checks every sum and the plan's hash and refuses a
bundle of another kernel ABI (this release speaks kernel ABI ` + fmt.Sprint(plan.KernelABI) + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if planFile == "" {
				return fmt.Errorf("--plan is required: a plan file made by `aimac plan`")
			}
			if target == "" {
				return fmt.Errorf("--target is required: %s", targetList(plan.GPUTargets()))
			}
			if !plan.Target(target).GPU() {
				return fmt.Errorf("--target %q: want %s", target, targetList(plan.GPUTargets()))
			}
			if out == "" {
				return fmt.Errorf("--out is required: the bundle directory")
			}
			user, err := hipcc.UserFlags(flags)
			if err != nil {
				return err
			}
			p, err := plan.ReadFile(planFile)
			if err != nil {
				return err
			}
			rep, err := bundler.Build(cmd.Context(), p, target, bundler.Options{Out: out, CacheDir: cacheDir, Flags: user, Workers: workers})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bundle %s: %s, kernel ABI %d, %d kernels (%d from the cache), %d files, plan %s\n",
				out, target, rep.Manifest.KernelABI, rep.Kernels, rep.Cached, len(rep.Manifest.Files)+1, rep.Manifest.PlanHash)
			return nil
		},
	}
	targets := targetNames(plan.GPUTargets())
	c.Flags().StringVar(&planFile, "plan", "", "plan `FILE` made by aimac plan (required)")
	c.Flags().StringVar(&target, "target", "", "`TARGET` the plan was made for: "+strings.Join(targets, ", "))
	c.Flags().StringVar(&out, "out", "", "bundle `DIR` (missing, empty, or a previous bundle to replace)")
	c.Flags().StringVar(&flags, "device-flags", "", "extra device-compiler `FLAGS` (default: $"+hipcc.FlagsEnv+")")
	c.Flags().StringVar(&cacheDir, "cache-dir", "", "compile cache `DIR` (default: no cache)")
	cliflag.Int(c.Flags(), &workers, "jobs", 0, 0, "`N` parallel compiles (0: one per CPU)")
	completeTarget(c, targets)
	return c
}
