package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/roofline"
)

// nominalBandwidth is the memory bandwidth (GB/s) a target's roofline is
// drawn at when --bandwidth is not given: what a large device-to-device
// copy reaches on the H200 (bytes read + written), and the Radeon 8060S's
// LPDDR5X-8000 on a 256-bit bus (its datasheet rate; a copy reaches less).
var nominalBandwidth = map[plan.Target]float64{
	plan.SM90:    4300,
	plan.GFX1151: 256,
}

func rooflineCmd() *cobra.Command {
	var dir, target, planFile, kvDType string
	var contexts []int
	var bandwidths []float64
	var ctxTokens int
	var families, greedy bool
	c := &cobra.Command{
		Use:   "roofline",
		Short: "Print the bytes a decode step must move and the tok/s they allow at a memory bandwidth",
		Long: `Read the decode step's byte model off a plan (package roofline: the weights its
launches read — the k selected experts' slices only —, the KV cache of the
context, the GDN state read and written) and divide by memory bandwidths:
the floor of a step's time and the most tokens per second batch-1 decode can
reach there. Without --plan the model is planned now for --target (the
embedded Qwen3.6-35B-A3B config unless --model-dir). Without --bandwidth the
target's nominal rate is used (sm_90: 4300 GB/s, what a device copy reaches
on the H200; gfx1151: 256 GB/s, the Radeon 8060S's LPDDR5X). --greedy reads
the greedy decode step instead, whose LM head is the certified int8 head
(half the head's bytes; docs/lm-head.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p *plan.Plan
			if planFile != "" {
				var err error
				if p, err = plan.ReadFile(planFile); err != nil {
					return err
				}
			} else {
				m, err := model(dir)
				if err != nil {
					return err
				}
				if p, err = planner.Plan(m, planner.Options{Target: plan.Target(target), Buckets: []int{1024}, ContextTokens: ctxTokens, KVDType: ir.DType(kvDType)}); err != nil {
					return err
				}
			}
			if len(bandwidths) == 0 {
				bw, ok := nominalBandwidth[p.Target]
				if !ok {
					return fmt.Errorf("target %s has no nominal bandwidth: give --bandwidth", p.Target)
				}
				bandwidths = []float64{bw}
			}
			for _, bw := range bandwidths {
				if !(bw > 0) || math.IsInf(bw, 0) {
					return fmt.Errorf("--bandwidth %v: want a positive rate in GB/s", bw)
				}
			}
			if len(contexts) == 0 {
				return fmt.Errorf("--context: give at least one length")
			}
			var steps []*roofline.Step
			for _, n := range contexts {
				if n < 1 || n > p.ContextTokens {
					return fmt.Errorf("--context %d: want 1 to the plan's %d tokens (--context-tokens)", n, p.ContextTokens)
				}
				step := roofline.Decode
				if greedy {
					step = roofline.Greedy
				}
				s, err := step(p, n)
				if err != nil {
					return err
				}
				steps = append(steps, s)
			}
			return printRoofline(cmd.OutOrStdout(), p, steps, bandwidths, families, greedy)
		},
	}
	c.Flags().StringVar(&planFile, "plan", "", "plan `FILE` made by aimac plan (default: plan the model now)")
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` when planning now (default: the embedded Qwen3.6-35B-A3B config)")
	c.Flags().StringVar(&target, "target", string(plan.GFX1151), "`TARGET` when planning now: "+targetList(plan.Targets))
	c.Flags().StringVar(&kvDType, "kv-dtype", "", "KV cache element `DTYPE` when planning now: f32 or bf16 (default: the target's)")
	cliflag.Int(c.Flags(), &ctxTokens, "context-tokens", 131072, 1, "context capacity `N` when planning now")
	c.Flags().IntSliceVar(&contexts, "context", []int{1024, 8192, 32768, 131072}, "context `LENGTHS` the step attends to (comma-separated)")
	c.Flags().Float64SliceVar(&bandwidths, "bandwidth", nil, "memory bandwidth `RATES` in GB/s (comma-separated; default: the target's nominal rate)")
	c.Flags().BoolVar(&families, "families", false, "also print the bytes of every kernel family at the first context")
	c.Flags().BoolVar(&greedy, "greedy", false, "the greedy decode step with the certified int8 LM head (decode_greedy) instead of decode")
	completeTarget(c, targetNames(plan.Targets))
	return c
}

// printRoofline writes one row per context and bandwidth: the bytes by
// kind, the step's floor and the tok/s it allows.
func printRoofline(w io.Writer, p *plan.Plan, steps []*roofline.Step, bandwidths []float64, families, greedy bool) error {
	what := "decode step"
	if greedy {
		what = "greedy decode step (the certified int8 LM head)"
	}
	fmt.Fprintf(w, "%s of %s on %s, %s\n", what, p.Model.Arch, p.Target, p.Hash())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "context\tweights GB\tKV GB\tstate GB\ttotal GB\tGB/s\tfloor ms\ttok/s\t")
	for _, s := range steps {
		for _, bw := range bandwidths {
			total := float64(s.Total.Total())
			floor := total / (bw * 1e9)
			fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\t%.2f\t%.1f\t\n", s.Context,
				float64(s.Total.Weights)/1e9, float64(s.Total.KV)/1e9, float64(s.Total.State)/1e9, total/1e9, bw, floor*1e3, 1/floor)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !families {
		return nil
	}
	s := steps[0]
	by := s.ByFamily()
	names := s.Families()
	sort.SliceStable(names, func(a, b int) bool { return by[names[a]].Total() > by[names[b]].Total() })
	launches := map[string]int{}
	for _, l := range s.Launches {
		launches[l.Family]++
	}
	fmt.Fprintf(w, "\nby family at context %d (%d launches)\n", s.Context, len(s.Launches))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tlaunches\tMB\tshare %\t")
	for _, f := range names {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.1f\t\n", f, launches[f], float64(by[f].Total())/1e6, 100*float64(by[f].Total())/float64(s.Total.Total()))
	}
	return tw.Flush()
}
