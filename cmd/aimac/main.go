// Command aimac is the compiler: it reads a Qwen3.6-35B-A3B checkpoint
// description, lowers the model to IR, plans buckets and buffers for a
// target, builds engine bundles (plan + compiled kernels + manifest) and
// writes synthetic checkpoints for tests and benchmarks.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/buildinfo"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/synth"
)

func main() {
	if err := root().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "aimac:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	c := &cobra.Command{
		Use:           "aimac",
		Short:         "Compile Qwen3.6-35B-A3B into a specialized inference engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	c.AddCommand(planCmd(), irCmd(), rooflineCmd(), synthCmd(), buildCmd())
	// --version: the build, and the targets plans can be made for (aimac
	// drives no device, so nothing is probed).
	bi := buildinfo.Read()
	c.Version = bi.Version
	mod := ""
	if bi.Modified {
		mod = " (modified)"
	}
	c.SetVersionTemplate(fmt.Sprintf("aimac %s\n  module  %s\n  commit  %s%s\n  go      %s\n  targets %s\n",
		bi.Version, bi.Module, bi.Commit, mod, bi.Go, targetList(plan.Targets)))
	return c
}

// completeTarget completes a --target flag from targets.
func completeTarget(c *cobra.Command, targets []string) {
	_ = c.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(targets, cobra.ShellCompDirectiveNoFileComp))
}

// model returns the model description of dir, or the embedded real config.
func model(dir string) (*planner.Model, error) {
	if dir == "" {
		return planner.FromConfig(arch.RealName, arch.Real()), nil
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return planner.FromCheckpoint(dir, ck)
}

func parseBuckets(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--buckets %q: %q is not an integer", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func planCmd() *cobra.Command {
	var dir, target, buckets, out, kvDType, fusion, tiling, prefillAttn, prefillGDN, gemmTile, tcSums string
	var ctxTokens, decodeSplits, gdnColTile, streamUnroll, aTerms int
	var gdnOutStage string
	var decodeStream, gdnPeer, moeRouter, moeRank, l2Prefetch, lateTrigger, gdnEarlyState, gdnOut, certifiedHead, wideExperts, persistentExperts, clusterA, sharedATerms, persistentDecode, qkFold bool
	var decodeMMA string
	c := &cobra.Command{
		Use:   "plan",
		Short: "Lower the model and write its plan (canonical JSON)",
		Long: `Lower every step of the model (each prefill bucket, the decode step, the
logits pass) to IR and schedule it for a target: kernels, buffers with roles
and arena offsets, ordered launches. Without --model-dir the embedded
Qwen3.6-35B-A3B config is planned. The output is byte-identical on every run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bs, err := parseBuckets(buckets)
			if err != nil {
				return err
			}
			m, err := model(dir)
			if err != nil {
				return err
			}
			p, err := planner.Plan(m, planner.Options{Target: plan.Target(target), Buckets: bs, ContextTokens: ctxTokens, KVDType: ir.DType(kvDType), Fusion: planner.Fusion(fusion),
				Tiling: planner.Tiling(tiling), DecodeSplits: decodeSplits, DecodeStream: decodeStream, DecodeMMA: planner.DecodeMMA(decodeMMA), QKFold: qkFold, MoERouter: moeRouter, MoERank: moeRank, L2Prefetch: l2Prefetch, LateTrigger: lateTrigger, GDNEarlyState: gdnEarlyState, GDNOut: gdnOut, GDNOutStage: gdnOutStage, StreamUnroll: streamUnroll, BF16Head: !certifiedHead, GDNColumnTile: gdnColTile, GDNPeer: gdnPeer, PrefillAttention: planner.PrefillAttention(prefillAttn),
				PrefillGDN: planner.PrefillGDN(prefillGDN), GEMMTile: planner.GEMMTile(gemmTile), TCSums: planner.TCSums(tcSums), ATerms: aTerms, WideExperts: wideExperts, PersistentExperts: persistentExperts, ClusterA: clusterA, SharedATerms: sharedATerms, PersistentDecode: persistentDecode})
			if err != nil {
				return err
			}
			if out == "-" {
				return p.Encode(cmd.OutOrStdout())
			}
			if err := p.WriteFile(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: target %s, %d phases, %d kernels, %d buffers, arena %d bytes, %s\n",
				out, p.Target, len(p.Phases), len(p.Kernels), len(p.Buffers), p.ArenaBytes, p.Hash())
			return nil
		},
	}
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` (default: the embedded Qwen3.6-35B-A3B config)")
	c.Flags().StringVar(&target, "target", string(plan.CPU), "`TARGET`: "+targetList(plan.Targets))
	c.Flags().StringVar(&buckets, "buckets", "1024,2048,4096,8192", "prefill bucket `SIZES`, increasing, comma-separated")
	cliflag.Int(c.Flags(), &ctxTokens, "context-tokens", 262144, 1, "context capacity `N` (prompt + output tokens)")
	c.Flags().StringVar(&kvDType, "kv-dtype", "", "KV cache element `DTYPE`: bf16 or f32 on a GPU target (default bf16: half the bytes, less exact), f32 on the cpu (the default)")
	c.Flags().StringVar(&fusion, "fusion", "", "the fusion pass `MODE`: on, off, or empty for the default (on for GPU targets, off on the cpu, whose plan is the oracle: see docs/prefill-gemm.md)")
	c.Flags().StringVar(&tiling, "tiling", "", "the tile pass `MODE` (prefill on the tensor-core families): on, off, or empty for the default (on for GPU targets, off on the cpu, whose plan is the oracle: see docs/prefill-gemm.md)")
	cliflag.IntRange(c.Flags(), &decodeSplits, "decode-splits", 0, -1, 1024, "`N` splits of the decode step's split-KV attention: 0 for the target's (GPU: from its multiprocessors; cpu: none), -1 to keep attention, 1 to 1024 on any target")
	c.Flags().BoolVar(&decodeStream, "decode-stream", false, "run the decode attention's split as attention_decode_stream (a cp.async ring) on sm_90")
	c.Flags().StringVar(&decodeMMA, "decode-mma", "", "the decode attention's split on tensor cores (attention_decode_mma, bf16 KV) `MODE`: on (every GPU target), fused (on, with the combine and the output gate in the same launch), off (the CUDA-core split), or empty for the default (on for sm_90, off on gfx1151: docs/decode-attention.md)")
	c.Flags().BoolVar(&qkFold, "qk-fold", false, "fold the decode step's qk_norm_rope_append (q/k norms, RoPE, KV append) into the split attention's launch where the plan fuses (attention_decode_mma_qk, attention_decode_split_qk: one launch a full-attention layer fewer; correct, and slower on the H200, so off by default: docs/decode-attention.md)")
	c.Flags().BoolVar(&certifiedHead, "certified-head", true, "give a GPU plan the greedy step with the certified int8 LM head (decode_greedy: the BF16 head's tokens from half its bytes, docs/lm-head.md); false leaves it out, so greedy draws use the BF16 head (the cpu plan always has it)")
	c.Flags().BoolVar(&moeRank, "moe-rank", false, "rank each decode MoE block's top-k once in the router's launch (rmsnorm_router_topk), gate_up reading the ids and down reading them before its programmatic wait")
	c.Flags().BoolVar(&lateTrigger, "late-trigger", false, "the decode step's streaming launches let the next launch start once a lane's last pass of weight loads is out, gdn_decode_split once its rows are done, rather than at their programmatic wait (sm_90): docs/pdl.md")
	c.Flags().BoolVar(&gdnOut, "gdn-out", false, "each decode GDN layer's output projection and residual add in its gdn_decode_split launch (gdn_decode_out: one grid barrier instead of the split's last-block norm and the gemv_add launch; the pair is the fallback where the grid does not fit the device): docs/gdn-decode.md")
	c.Flags().StringVar(&gdnOutStage, "gdn-out-stage", "", "with --gdn-out, `MODE` says where gdn_decode_out copies its slice of the output projection to shared memory: early (before the programmatic wait), late (after the state's loads), mid (once the first row's inputs are loaded), bulk (before the wait, as bulk copies on an mbarrier), off (read from global memory after the chain), or empty for early (sm_90): docs/gdn-decode.md")
	c.Flags().BoolVar(&gdnEarlyState, "gdn-early-state", false, "gdn_decode_split loads its state slice before the programmatic wait (sm_90): docs/pdl.md")
	c.Flags().BoolVar(&l2Prefetch, "l2-prefetch", false, "the decode step's weight-streaming launches (gemv, gemv_add, rmsnorm_gemv up to 64 MB, moe_decode_gate_up's shared expert) ask the L2 for their first weight bytes before the programmatic wait, on targets that launch programmatically (sm_90): docs/pdl.md")
	cliflag.IntRange(c.Flags(), &streamUnroll, "stream-unroll", 0, 0, kernels.GEMVMaxLoads, "`N` 16-byte weight chunks a lane of the decode step's weight-streaming launches loads before its FMAs (a tuning knob; 0: the target's, docs/gemv.md)")
	c.Flags().BoolVar(&moeRouter, "moe-router", false, "fold each decode MoE block's router into its gate_up launch behind a grid barrier (moe_decode_route_gate_up; the engine runs the two launches where the device cannot hold its grid)")
	cliflag.IntRange(c.Flags(), &gdnColTile, "gdn-col-tile", 0, -1, 1<<16, "`N` state columns a block of the decode step's gdn_decode_split or gdn_decode_peer: 0 for the target's (GPU: a block per multiprocessor or more; with --gdn-peer the narrowest tile whose blocks fit one wave), -1 to keep gdn_decode_step (a block per key head), N to ask for N on any target")
	c.Flags().BoolVar(&gdnPeer, "gdn-peer", false, "run the decode step's column-tiled GDN step as gdn_decode_peer (the blocks of a key head finish the gated norm together, in one wave) instead of gdn_decode_split (measured slower on the H200: docs/gdn-decode.md)")
	c.Flags().StringVar(&prefillAttn, "prefill-attention", "", "the prefill steps' attention `FAMILY`: flash (attention_prefill, tensor cores, operands split to keep f32 precision where the target affords it), flash-bf16 (the same with plain bf16 operands: faster, less exact), wgmma (attention_prefill_wg, sm_90a's warpgroup products, where it serves the op: a bf16 cache, head_dim a multiple of 64; flash elsewhere), wgmma-bf16 (the same with plain bf16 operands), wgmma-fp16 (the same with q, k, v and p as one fp16 term each, saturated at ±65504), eager (attention + attn_output_gate), or empty for the target's default (wgmma on sm_90, flash where it does not serve the op; eager elsewhere)")
	c.Flags().StringVar(&out, "out", "-", "output `FILE` (- for stdout)")
	completeTarget(c, targetNames(plan.Targets))
	_ = c.RegisterFlagCompletionFunc("kv-dtype", cobra.FixedCompletions([]string{"f32", "bf16"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("fusion", cobra.FixedCompletions([]string{"on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("tiling", cobra.FixedCompletions([]string{"on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("decode-mma", cobra.FixedCompletions([]string{"on", "fused", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("gdn-out-stage", cobra.FixedCompletions([]string{"early", "late", "mid", "bulk", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("prefill-attention", cobra.FixedCompletions([]string{"flash", "flash-bf16", "wgmma", "wgmma-bf16", "wgmma-fp16", "eager"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&prefillGDN, "prefill-gdn", "", "the prefill steps' gated delta rule and conv `FAMILY`: wy (gated_delta_wy + gated_delta_state, the chunked form on tensor cores with split tf32 operands, and causal_conv1d_silu_rows), wy-tf32 (the same with plain tf32 operands: faster, less exact), chunked (gated_delta_chunked + causal_conv1d_silu, the token-by-token recurrence and the serial conv), or empty for the target's default (wy on GPU targets where its tiles fit, chunked on the cpu, whose plan is the oracle)")
	_ = c.RegisterFlagCompletionFunc("prefill-gdn", cobra.FixedCompletions([]string{"wy", "wy-tf32", "chunked"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&gemmTile, "gemm-tile", "", "the tile `KIND` under the tiled GEMMs (gemm, gemm_add, the grouped MoE's): wgmma (sm_90a's warpgroup products, sm_90 only), wgmma-ws (gemm and gemm_add on the same products warp-specialized, each k-tile's partial sums added in f32 with round-to-nearest whatever --tc-sums says, the grouped MoE's on wgmma: sm_90 only), mma (mma.sync on sm_90, WMMA on gfx1151), or empty for the target's default (wgmma on sm_90: see docs/prefill-gemm.md)")
	_ = c.RegisterFlagCompletionFunc("gemm-tile", cobra.FixedCompletions([]string{"wgmma", "wgmma-ws", "mma"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&tcSums, "tc-sums", "", "how the tensor-core kernels keep their sums over a long axis `MODE`: mma (the whole sum in the MMA accumulators, whose alignment truncates), flush (the tiled GEMMs' k-tiles summed apart and added in rounded to nearest: flush_k; the wgmma tile flushes its 256 columns half at a time, the mma tile takes 128), flush-slice (the same for every 16-deep slice), flush-all (flush, and the chunked GDN's state and the flash prefill attention's p·v), or empty for the target's default (flush on sm_90, mma elsewhere: see docs/prefill-gemm.md)")
	c.Flags().BoolVar(&persistentDecode, "persistent-decode", false, "run each run of the decode step's launches whose families allow it as one persistent launch of work items, each waiting for the launch before its own (GPU targets; docs/persistent.md)")
	c.Flags().BoolVar(&sharedATerms, "shared-a-terms", false, "the wgmma tile's A terms rounded once a k-tile into shared memory, both product operands read from there (sm_90, with --tc-sums flush; docs/prefill-gemm.md)")
	c.Flags().BoolVar(&clusterA, "cluster-a", false, "the wgmma tile's GEMMs (dense and grouped) as clusters of two column tiles that each copy half of their shared A rows into both (sm_90; docs/prefill-gemm.md)")
	c.Flags().BoolVar(&persistentExperts, "persistent-experts", false, "the grouped MoE GEMMs on the wgmma tile as one block per multiprocessor walking the tiles, each copying its next tile in under the last one's stores (sm_90; measured slower than the default: docs/prefill-gemm.md)")
	c.Flags().BoolVar(&wideExperts, "wide-experts", false, "the grouped MoE GEMMs on the wgmma tile's 256 columns instead of 128 (sm_90; with the flushed sums they spill there, which the bundler refuses: docs/prefill-gemm.md)")
	cliflag.IntRange(c.Flags(), &aTerms, "a-terms", 0, 0, 3, "`N` bf16 terms the tiled projections stage their f32 activations as (1: plain bf16, 2: hi + lo, 3: hi + lo + lo2): fewer are fewer tensor-core products and less exact sums; 0 for the target's (3 on sm_90, 2 on gfx1151: see docs/prefill-gemm.md)")
	_ = c.RegisterFlagCompletionFunc("tc-sums", cobra.FixedCompletions([]string{"mma", "flush", "flush-slice", "flush-all"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

func irCmd() *cobra.Command {
	var dir, step, target, after string
	var ctxTokens int
	var list bool
	c := &cobra.Command{
		Use:   "ir",
		Short: "Print the IR graph of one step (prefill:N, decode, decode_greedy, logits:N or sample) after a planner pass",
		Long: `Print the IR graph of one step of the model after any of the planner's
passes (--passes lists them in order; the default is the last). After
"fuse" a GPU target's graph shows the fused families, after "stream" the
weight-streaming families of its one-row projections, after "configure" each
op's grid and block, after "schedule" each activation's arena offset and
live range.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				for _, p := range planner.Passes() {
					fmt.Fprintln(cmd.OutOrStdout(), p)
				}
				return nil
			}
			m, err := model(dir)
			if err != nil {
				return err
			}
			kind, n, _ := strings.Cut(step, ":")
			tokens := 1
			switch plan.PhaseKind(kind) {
			case plan.DecodeStep, plan.DecodeGreedy, plan.Sample:
			case plan.Prefill, plan.Logits:
				if tokens, err = strconv.Atoi(n); err != nil || tokens <= 0 {
					return fmt.Errorf("--step %q: want prefill:N, decode, decode_greedy, logits:N or sample", step)
				}
			default:
				return fmt.Errorf("--step %q: want prefill:N, decode, decode_greedy, logits:N or sample", step)
			}
			// Plan one bucket of the step's size, so its graph is the
			// step's alone.
			o := planner.Options{Target: plan.Target(target), Buckets: []int{tokens}, ContextTokens: ctxTokens, LogitsRows: tokens}
			gs, err := planner.Graphs(m, o, after)
			if err != nil {
				return err
			}
			for _, g := range gs {
				if g.Name == step || (kind == string(plan.Prefill) && g.Name == fmt.Sprintf("prefill_%d", tokens)) ||
					(kind != string(plan.Prefill) && g.Name == kind) {
					fmt.Fprint(cmd.OutOrStdout(), g.Dump(kernels.Families))
					return nil
				}
			}
			return fmt.Errorf("--step %q: no such graph", step)
		},
	}
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` (default: the embedded Qwen3.6-35B-A3B config)")
	c.Flags().StringVar(&step, "step", "decode", "`STEP` to print: prefill:N, decode, decode_greedy, logits:N or sample")
	c.Flags().StringVar(&target, "target", string(plan.CPU), "`TARGET`: "+targetList(plan.Targets))
	c.Flags().StringVar(&after, "after", "", "print the graph after this `PASS` (default: after the last; see --passes)")
	c.Flags().BoolVar(&list, "passes", false, "list the planner's passes in order and exit")
	cliflag.Int(c.Flags(), &ctxTokens, "context-tokens", 4096, 1, "context capacity `N`")
	completeTarget(c, targetNames(plan.Targets))
	return c
}

func synthCmd() *cobra.Command {
	var o synth.Options
	c := &cobra.Command{
		Use:   "synth",
		Short: "Write a deterministic random checkpoint in the real on-disk layout",
		Long: `Write a random checkpoint: nested config, model.language_model.* tensors in
several safetensors shards with an index, lm_head at the root, fused experts,
decoy vision and MTP tensors, and a tokenizer and chat template of its own.
"tiny" is small enough for tests and has every architectural feature; "full"
has the real widths (use --layers to keep it on disk).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Out == "" {
				return fmt.Errorf("--out is required")
			}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				o.Progress = progress(cmd)
			}
			if err := synth.Write(o); err != nil {
				return err
			}
			what := "checkpoint"
			if o.ConfigOnly {
				what = "model files (no tensors)"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s %s to %s\n", o.Preset, what, o.Out)
			return nil
		},
	}
	c.Flags().StringVar(&o.Preset, "preset", "tiny", "`PRESET`: "+strings.Join(synth.Presets(), ", "))
	cliflag.Int(c.Flags(), &o.Layers, "layers", 0, 0, "number of layers `N` (0: the preset's)")
	c.Flags().Uint64Var(&o.Seed, "seed", 1, "random `SEED`")
	c.Flags().StringVar(&o.Out, "out", "", "output `DIR` (must not exist or be empty)")
	c.Flags().BoolVar(&o.ConfigOnly, "config-only", false, "write the config, tokenizer, chat template and generation config but no tensors (for an engine run with --synthetic-weights)")
	_ = c.RegisterFlagCompletionFunc("preset", cobra.FixedCompletions(synth.Presets(), cobra.ShellCompDirectiveNoFileComp))
	return c
}

// targetList spells targets for help texts.
func targetList(ts []plan.Target) string { return strings.Join(targetNames(ts), ", ") }

// targetNames are the targets' names, for help texts and completion.
func targetNames(ts []plan.Target) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return s
}
