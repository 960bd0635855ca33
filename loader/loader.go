// Package loader wires a model directory and a plan into a running engine:
// open and validate the checkpoint, read or make the plan, check that they
// belong together, and start the backend. Commands and the server share it.
package loader

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/cuda"
	"github.com/aimaproject/aimac/runtime/hip"
	"github.com/aimaproject/aimac/tokenizer"
)

// Options say what to load.
type Options struct {
	ModelDir string
	// PlanFile is a plan made by `aimac plan`; empty plans the model now.
	PlanFile string
	// For a plan made now: the target, buckets and context size.
	Target        string
	Buckets       []int
	ContextTokens int
	// PrefixCacheBytes is the prefix cache's byte bound, counted in the
	// memory plan.
	PrefixCacheBytes int64
	// MemoryLimit is what the engine may allocate (0: the host's available
	// memory on the CPU backend).
	MemoryLimit int64
	// Synthetic generates the weights from SyntheticSeed instead of reading
	// them: only config.json of the model directory is read.
	Synthetic     bool
	SyntheticSeed uint64
	// Cubins are the compiled kernels of a GPU plan, by kernel name, as an
	// opened bundle holds them (bundle.Bundle.Objects); the runtime never
	// compiles.
	Cubins map[string][]byte
	// Progress, when not nil, gets a progress bar of the weights' upload
	// (a terminal: the bar redraws its line), cleared at the end.
	Progress io.Writer
}

// Loaded is a ready engine with what it was made from.
type Loaded struct {
	Engine     *runtime.Engine
	Checkpoint *checkpoint.Checkpoint
	Plan       *plan.Plan
	// TokenizerVocab is the number of real token ids (0 when the model
	// directory has no tokenizer.json): ids at or above it are padding.
	TokenizerVocab int
	// Memory is the memory plan.
	Memory runtime.Memory
	// Backend runs the engine; Close closes it.
	Backend runtime.Backend
}

// Open loads the model. The caller closes the result.
func Open(o Options) (*Loaded, error) {
	var ck *checkpoint.Checkpoint
	var m *planner.Model
	var err error
	if o.Synthetic {
		if m, err = ConfigModel(o.ModelDir); err != nil {
			return nil, err
		}
	} else {
		if ck, err = checkpoint.Open(o.ModelDir); err != nil {
			return nil, err
		}
		if m, err = planner.FromCheckpoint(filepath.Base(o.ModelDir), ck); err != nil {
			ck.Close()
			return nil, err
		}
	}
	var p *plan.Plan
	if o.PlanFile != "" {
		if p, err = plan.ReadFile(o.PlanFile); err != nil {
			closeCheckpoint(ck)
			return nil, err
		}
		if p.Model.Fingerprint != m.Fingerprint() {
			closeCheckpoint(ck)
			return nil, fmt.Errorf("plan %s was made for model %s, but %s is %s", o.PlanFile, p.Model.Fingerprint, o.ModelDir, m.Fingerprint())
		}
	} else {
		target := plan.Target(o.Target)
		if target == "" {
			target = plan.CPU
		}
		if p, err = planner.Plan(m, planner.Options{Target: target, Buckets: o.Buckets, ContextTokens: o.ContextTokens}); err != nil {
			closeCheckpoint(ck)
			return nil, err
		}
	}
	mem := runtime.MemoryOf(p, o.PrefixCacheBytes)
	if err := Fits(mem, o.MemoryLimit, p.ContextTokens); err != nil {
		closeCheckpoint(ck)
		return nil, err
	}
	be, err := BackendFor(string(p.Target), o.Cubins)
	if err != nil {
		closeCheckpoint(ck)
		return nil, err
	}
	weights := runtime.SyntheticWeights(o.SyntheticSeed)
	finishBar := func() {}
	if ck != nil {
		weights = runtime.CheckpointWeights(ck)
		if o.Progress != nil {
			var report func(done, total int64)
			report, finishBar = weightsBar(o.Progress)
			weights = runtime.CheckpointWeightsProgress(ck, report)
		}
	}
	e, err := runtime.NewEngine(p, be, weights)
	finishBar()
	if err != nil {
		be.Close()
		closeCheckpoint(ck)
		return nil, err
	}
	vocab, err := TokenizerVocab(o.ModelDir)
	if err != nil {
		e.Close()
		be.Close()
		closeCheckpoint(ck)
		return nil, err
	}
	return &Loaded{Engine: e, Checkpoint: ck, Plan: p, TokenizerVocab: vocab, Memory: mem, Backend: be}, nil
}

// Fits refuses a memory plan larger than the limit (the host's available
// memory when 0; the CPU backend maps weights from the file, so they are
// not counted against it). Open applies it; doctor reports it.
func Fits(m runtime.Memory, limit int64, contextTokens int) error {
	if limit == 0 {
		limit = runtime.HostAvailable()
	}
	if limit <= 0 || m.Allocated() <= limit {
		return nil
	}
	return fmt.Errorf("the engine needs %s (KV cache %s for %d context tokens, states %s, activations %s, prefix cache %s) but only %s is available: lower --context-tokens or the prefix cache size",
		runtime.HumanBytes(m.Allocated()), runtime.HumanBytes(m.KV), contextTokens, runtime.HumanBytes(m.State),
		runtime.HumanBytes(m.Activations), runtime.HumanBytes(m.PrefixCache), runtime.HumanBytes(limit))
}

// Close releases the engine, its backend and the checkpoint's mappings.
func (l *Loaded) Close() error {
	err := l.Engine.Close()
	if l.Backend != nil {
		err = errors.Join(err, l.Backend.Close())
	}
	if l.Checkpoint != nil {
		err = errors.Join(err, l.Checkpoint.Close())
	}
	return err
}

// ConfigModel describes the model of DIR/config.json with the dtypes Qwen
// ships, for synthetic weights.
func ConfigModel(dir string) (*planner.Model, error) {
	path := filepath.Join(dir, checkpoint.ConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := arch.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return planner.FromConfig(filepath.Base(dir), cfg), nil
}

// Backend returns the backend that runs plans for target when it needs no
// compiled kernels (the CPU).
func Backend(target string) (runtime.Backend, error) { return BackendFor(target, nil) }

// BackendFor returns the backend that runs plans for target: the CPU, an
// sm_90 GPU through the CUDA driver with the plan's cubins, or a gfx1151
// GPU through the HIP runtime (libamdhip64.so, from ROCm) with the plan's
// .hsaco code objects; both come as kernel name → code object.
func BackendFor(target string, cubins map[string][]byte) (runtime.Backend, error) {
	switch plan.Target(target) {
	case plan.CPU:
		return runtime.NewCPU(), nil
	case cuda.Target:
		if len(cubins) == 0 {
			return nil, fmt.Errorf("target %s needs the plan's kernels compiled to cubins (build a bundle with aimac build and load it with --bundle)", target)
		}
		be, err := cuda.NewCUDA(cubins)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return be, nil
	case hip.Target:
		if len(cubins) == 0 {
			return nil, fmt.Errorf("target %s needs the plan's kernels compiled to .hsaco code objects (build a bundle with aimac build and load it with --bundle)", target)
		}
		be, err := hip.New(cubins)
		if err != nil {
			return nil, err
		}
		return be, nil
	}
	return nil, fmt.Errorf("target %s: no backend in this build runs it yet (plans for it can be made and inspected)", target)
}

// TokenizerVocab is the size of DIR/tokenizer.json's vocabulary (one past
// its largest id), read by the tokenizer itself; 0 when there is no such file.
func TokenizerVocab(dir string) (int, error) {
	path := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return 0, err
	}
	return tok.Size(), nil
}

func closeCheckpoint(ck *checkpoint.Checkpoint) {
	if ck != nil {
		ck.Close()
	}
}
