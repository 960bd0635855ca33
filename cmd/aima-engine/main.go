// Command aima-engine runs a compiled engine: the OpenAI-compatible server,
// and probes that check it from the outside (logits, greedy generation,
// tokenization) on the CPU backend or any target.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/aimaproject/aimac/bundle"
	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/npy"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/tokenizer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "aima-engine:", err)
		os.Exit(1)
	}
}

func root() *cobra.Command {
	c := &cobra.Command{
		Use:           "aima-engine",
		Short:         "Run a Qwen3.6-35B-A3B engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	probe := &cobra.Command{Use: "probe", Short: "Check the engine from outside: logits, greedy generation, tokens, timing, the chat template"}
	probe.AddCommand(logitsCmd(), generateCmd(), tokenizeCmd(), benchCmd(), chatTemplateCmd())
	c.AddCommand(probe, serveCmd(), versionCmd(), doctorCmd(), verifyCmd())
	versionFlag(c)
	return c
}

// targetNames are the plan targets, for help and completion.
func targetNames() []string {
	var s []string
	for _, t := range plan.Targets {
		s = append(s, string(t))
	}
	return s
}

// defaultBuckets are the prefill buckets of a plan made on the spot.
const defaultBuckets = "64,256,1024"

// loadFlags are the flags every probe shares.
type loadFlags struct {
	o         loader.Options
	buckets   string
	tokens    string
	synthetic string
	bundle    string
	// certifiedHead: greedy draws may take the certified int8 LM head
	// (the engine's default: on GPU targets); false keeps the BF16 head.
	certifiedHead bool
	// decodeTail: the longest last prompt segment run as decode steps (-1:
	// the engine's default, runtime.DefaultDecodeTail on GPU targets).
	decodeTail int
	flags      *pflag.FlagSet // to tell flags given from defaults
}

// registerModel adds the flags that choose the model and its plan.
func (f *loadFlags) registerModel(c *cobra.Command) {
	f.flags = c.Flags()
	c.Flags().StringVar(&f.o.ModelDir, "model-dir", "", "checkpoint `DIR`")
	c.Flags().StringVar(&f.o.PlanFile, "plan", "", "plan `FILE` made by aimac plan (default: plan the model now)")
	c.Flags().StringVar(&f.bundle, "bundle", "", "engine bundle `DIR` made by aimac build: its plan and compiled kernels, verified (file sums, plan hash, kernel ABI) before loading (instead of --plan)")
	c.Flags().StringVar(&f.o.Target, "target", "cpu", "`TARGET` when planning now: "+strings.Join(targetNames(), ", "))
	c.Flags().StringVar(&f.buckets, "buckets", defaultBuckets, "prefill bucket `SIZES` when planning now, comma-separated")
	cliflag.Int(c.Flags(), &f.o.ContextTokens, "context-tokens", 4096, 1, "context capacity `N` (prompt + output) when planning now")
	c.Flags().StringVar(&f.synthetic, "synthetic-weights", "", "generate the weights from `SEED` instead of reading them (only config.json is read)")
	c.Flags().BoolVar(&f.certifiedHead, "certified-head", true, "greedy draws that need no logprob decode with the certified int8 LM head where the plan has one, on GPU targets (the same tokens as the BF16 head); false: the BF16 head")
	cliflag.IntRange(c.Flags(), &f.decodeTail, "decode-tail", -1, -1, 1<<20, "`N`: a prompt's last segment of at most N tokens runs as decode steps instead of a prefill step (-1: the engine's default, 16 on GPU targets and 0 on the cpu; 0: never; docs/serving.md)")
	_ = c.RegisterFlagCompletionFunc("target", cobra.FixedCompletions(targetNames(), cobra.ShellCompDirectiveNoFileComp))
}

func (f *loadFlags) register(c *cobra.Command) {
	f.registerModel(c)
	c.Flags().StringVar(&f.tokens, "tokens", "", "prompt token `IDS`, comma-separated (required)")
}

// parseSynthetic reads --synthetic-weights.
func (f *loadFlags) parseSynthetic() error {
	if f.synthetic == "" {
		return nil
	}
	seed, err := strconv.ParseUint(f.synthetic, 10, 64)
	if err != nil {
		return fmt.Errorf("--synthetic-weights %q: want a seed, a non-negative integer", f.synthetic)
	}
	f.o.Synthetic, f.o.SyntheticSeed = true, seed
	return nil
}

// openBundle reads --bundle: it verifies the bundle and points the loader at
// its plan and code objects, so a GPU plan runs without a compiler; the
// loader still holds the plan's fingerprint to --model-dir.
func (f *loadFlags) openBundle() error {
	if f.o.PlanFile != "" || f.bundle != "" {
		for _, name := range []string{"target", "buckets", "context-tokens"} {
			if f.flags != nil && f.flags.Changed(name) {
				return fmt.Errorf("--%s plans the model on the spot; with --plan or --bundle the plan decides it", name)
			}
		}
	}
	if f.bundle == "" {
		return nil
	}
	if f.o.PlanFile != "" {
		return fmt.Errorf("give one of --plan and --bundle: a bundle carries its own plan")
	}
	b, err := bundle.Open(f.bundle)
	if err != nil {
		return err
	}
	f.o.PlanFile, f.o.Cubins = b.PlanPath(), b.Objects
	return nil
}

func (f *loadFlags) parseBuckets() error {
	var err error
	f.o.Buckets, err = parseBuckets(f.buckets)
	return err
}

// parseBuckets reads --buckets: positive sizes, comma-separated (the
// planner holds them to its own rules).
func parseBuckets(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--buckets %q: %q is not an integer", s, f)
		}
		if n < 1 {
			return nil, fmt.Errorf("--buckets %q: %d is not a positive size", s, n)
		}
		out = append(out, n)
	}
	return out, nil
}

// load loads the model; a progress bar of the weights goes to stderr when
// it is a terminal.
func (f *loadFlags) load(stderr io.Writer) (*loader.Loaded, []int32, error) {
	if f.o.ModelDir == "" {
		return nil, nil, fmt.Errorf("--model-dir is required")
	}
	ids, err := parseIDs(f.tokens)
	if err != nil {
		return nil, nil, err
	}
	if err := f.parseBuckets(); err != nil {
		return nil, nil, err
	}
	if err := f.parseSynthetic(); err != nil {
		return nil, nil, err
	}
	if err := f.openBundle(); err != nil {
		return nil, nil, err
	}
	o := f.o
	o.Progress = terminal(stderr)
	l, err := loader.Open(o)
	if err != nil {
		return nil, nil, err
	}
	if err := f.configure(l.Engine); err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, ids, nil
}

// configure applies the flags that set a loaded engine's choices.
func (f *loadFlags) configure(e *runtime.Engine) error {
	if f.decodeTail >= 0 {
		if err := e.SetDecodeTail(f.decodeTail); err != nil {
			return fmt.Errorf("--decode-tail: %w", err)
		}
	}
	if f.certifiedHead {
		return nil // the engine's default
	}
	if err := e.SetCertifiedHead(false); err != nil {
		return fmt.Errorf("--certified-head=false: %w", err)
	}
	return nil
}

// terminal is w when it is a terminal, for progress bars; nil otherwise
// (a pipe, a file, a test's buffer), so that logs get no bar.
func terminal(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return w
	}
	return nil
}

func parseIDs(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("--tokens is required: comma-separated token ids")
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--tokens: %q is not a token id", f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func logitsCmd() *cobra.Command {
	var f loadFlags
	var out string
	var decodeLast int
	c := &cobra.Command{
		Use:   "logits",
		Short: "Write teacher-forced float32 logits [T, vocab] of a prompt as .npy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			l, ids, err := f.load(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			V := l.Engine.Vocab()
			all := make([]float32, len(ids)*V)
			// The last decodeLast positions go through the decode step one
			// token at a time: the same teacher-forced logits from the decode
			// kernels instead of the prefill's.
			split := max(len(ids)-decodeLast, 0)
			if split > 0 {
				_, err = l.Engine.Prefill(cmd.Context(), ids[:split], func(start int, rows [][]float32) error {
					for i, r := range rows {
						copy(all[(start+i)*V:], r)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			for i := split; i < len(ids); i++ {
				logits, err := l.Engine.Decode(cmd.Context(), ids[i])
				if err != nil {
					return fmt.Errorf("decode at position %d: %w", i, err)
				}
				copy(all[i*V:], logits)
			}
			if err := npy.WriteFile(out, []int{len(ids), V}, all); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: logits [%d, %d] on %s\n", out, len(ids), V, l.Plan.Target)
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&out, "out", "", "output .npy `FILE` (required)")
	cliflag.Int(c.Flags(), &decodeLast, "decode-last", 0, 0, "feed the last `N` prompt tokens through the decode step one at a time (teacher-forced decode logits)")
	return c
}

func generateCmd() *cobra.Command {
	var f loadFlags
	var maxTokens int
	var stop string
	c := &cobra.Command{
		Use:   "generate",
		Short: "Print the greedy continuation of a prompt as a JSON array of ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var stopIDs []int32
			if stop != "" {
				var err error
				if stopIDs, err = parseIDs(stop); err != nil {
					return fmt.Errorf("--stop: %w", err)
				}
			}
			l, ids, err := f.load(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := runtime.NewSampler(runtime.SamplerConfig{VocabLimit: l.TokenizerVocab})
			if err != nil {
				return err
			}
			out, err := l.Engine.Generate(cmd.Context(), ids, maxTokens, s, stopIDs)
			if err != nil {
				return err
			}
			if out == nil {
				out = []int32{}
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
		},
	}
	f.register(c)
	cliflag.Int(c.Flags(), &maxTokens, "max-tokens", 16, 0, "`N` tokens to generate")
	c.Flags().StringVar(&stop, "stop", "", "token `IDS` that end generation, comma-separated (default: none)")
	return c
}

func tokenizeCmd() *cobra.Command {
	var dir, file, text string
	c := &cobra.Command{
		Use:   "tokenize",
		Short: "Print the token ids of a text as a JSON array",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (dir == "") == (file == "") {
				return fmt.Errorf("give exactly one of --model-dir and --tokenizer")
			}
			if file == "" {
				file = filepath.Join(dir, "tokenizer.json")
			}
			tok, err := tokenizer.Load(file)
			if err != nil {
				return err
			}
			ids := tok.Encode(text)
			if ids == nil {
				ids = []int32{}
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(ids)
		},
	}
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` holding tokenizer.json")
	c.Flags().StringVar(&file, "tokenizer", "", "a tokenizer.json `FILE`")
	c.Flags().StringVar(&text, "text", "", "the `TEXT` to tokenize")
	return c
}
