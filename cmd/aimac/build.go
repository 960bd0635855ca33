package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/bundle"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// buildCmd is `aimac build`: it only parses flags and hands the plan to
// bundle.Build, which does the rendering, compiling and writing.
func buildCmd() *cobra.Command {
	var planFile, target, out, flags, cacheDir string
	var workers int
	c := &cobra.Command{
		Use:   "build",
		Short: "Compile a plan's kernels and write an engine bundle (plan, code objects, manifest)",
		Args:  cobra.NoArgs,
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
			rep, err := bundle.Build(cmd.Context(), p, target, bundle.Options{Out: out, CacheDir: cacheDir, Flags: user, Workers: workers})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bundle %s: %s, %d kernels (%d from the cache), %d files, plan %s\n",
				out, target, rep.Kernels, rep.Cached, len(rep.Manifest.Files)+1, rep.Manifest.PlanHash)
			return nil
		},
	}
	c.Flags().StringVar(&planFile, "plan", "", "plan file made by `aimac plan` (required)")
	c.Flags().StringVar(&target, "target", "", "target the plan was made for: "+targetList(plan.GPUTargets()))
	c.Flags().StringVar(&out, "out", "", "bundle directory (missing, empty, or a previous bundle to replace)")
	c.Flags().StringVar(&flags, "device-flags", "", "extra device-compiler flags (default: $"+hipcc.FlagsEnv+")")
	c.Flags().StringVar(&cacheDir, "cache-dir", "", "compile cache directory (default: no cache)")
	c.Flags().IntVar(&workers, "jobs", 0, "parallel compiles (default: one per CPU)")
	return c
}
