package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/doctor"
)

func doctorCmd() *cobra.Command {
	var o doctor.Options
	var buckets string
	var cacheMiB int64
	var asJSON bool
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check this machine before serving: GPU, memory, bundle, checkpoint, port",
		Long: `Check what serve needs, one line per check, and exit non-zero when any fails:

  gpu            the CUDA driver and HIP runtime, device 0's name, compute capability
                 and free memory ("no GPU driver: CPU only" fails only with a GPU --bundle)
  checkpoint     --model-dir validated: headers, index, tensor table, every problem listed
  sums           whether --model-dir has a SHA256SUMS manifest (verify hashes it)
  bundle         --bundle verified: every file's sha256, the plan's hash, the model it is for
  bundle-device  a device here runs the bundle's target
  memory         weights, KV cache, state, activations and prefix cache of the plan (the
                 bundle's, or one made now for the device at --context-tokens) against
                 the device's free memory and the host's available memory
  port           --host:--port can be bound

Without --model-dir the memory check plans the embedded Qwen3.6-35B-A3B config.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.BundleDir != "" {
				for _, name := range []string{"context-tokens", "buckets"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s shapes a plan made now; with --bundle the bundle's plan decides it", name)
					}
				}
			}
			var err error
			if o.Buckets, err = parseBuckets(buckets); err != nil {
				return err
			}
			o.PrefixCacheBytes = cacheMiB << 20
			checks := doctor.Run(o)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return err
				}
			} else {
				for _, c := range checks {
					fmt.Fprintln(cmd.OutOrStdout(), c)
				}
			}
			if n := doctor.Failed(checks); n > 0 {
				return fmt.Errorf("%d of %d checks failed", n, len(checks))
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.ModelDir, "model-dir", "", "checkpoint `DIR` to validate")
	fl.StringVar(&o.BundleDir, "bundle", "", "engine bundle `DIR` to verify against its manifest and this machine's device")
	cliflag.Int(fl, &o.ContextTokens, "context-tokens", 4096, 1, "context capacity `N` of the plan the memory check makes (as serve's)")
	fl.StringVar(&buckets, "buckets", defaultBuckets, "prefill bucket `SIZES` of that plan, comma-separated (as serve's)")
	cliflag.MiB(fl, &cacheMiB, "prefix-cache-mib", 4096, 0, "prefix cache bound in `MiB` counted in the memory plan (as serve's)")
	fl.StringVar(&o.Host, "host", "127.0.0.1", "`ADDRESS` serve would listen on")
	cliflag.Port(fl, &o.Port, "port", 8000, "`PORT` serve would listen on")
	fl.BoolVar(&asJSON, "json", false, "print the checks as a JSON array of {check, ok, detail}")
	return c
}
