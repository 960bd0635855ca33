// Package synth writes deterministic random checkpoints of the qwen3_5_moe
// architecture in the real on-disk layout: a nested config.json, sharded
// BF16 safetensors with an index (plus vision and MTP decoy tensors that a
// text engine must skip), a byte-level BPE tokenizer of its own in the
// Hugging Face tokenizer.json format with Qwen's added tokens, the
// tokenizer and generation configs, and a chat template that renders as
// Qwen3.6's does.
//
// The tiny preset is a few-megabyte model with every structural feature of
// the real one, for tests of the whole engine; the full preset has the real
// model's dimensions (optionally fewer layers), for load, memory and speed
// tests without the real weights. The same options always give
// byte-identical files.
package synth

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/checkpoint"
)

// chatTemplate is the chat template synth ships (Qwen3.6's rendering rules).
//
//go:embed chat_template.jinja
var chatTemplate string

// Options says what Write produces.
type Options struct {
	Preset string // "tiny" or "full"
	// Layers is the number of decoder layers; 0 = the preset's default
	// (tiny 4, full 40). Layer i is full attention iff (i+1)%4 == 0, as in
	// the real model. At most MaxLayers.
	Layers int
	Seed   uint64 // weight values; the same seed gives the same bytes
	// Out is the output directory: created if missing, refused if it exists
	// and is not empty, so nothing is ever overwritten.
	Out string
	// ShardBytes caps a shard's tensor bytes (a larger tensor gets a shard of
	// its own); 0 = the preset's default: a quarter of the weights for tiny
	// (so it spans several shards), 4 GiB for full. A shard is generated in
	// memory before it is written, so this is also about Write's peak memory.
	ShardBytes int64
	// ConfigOnly writes the model's files without its tensors: config,
	// tokenizer, chat template and generation config, what an engine run
	// with generated weights (--synthetic-weights) reads — the full model
	// without 69 GB on disk.
	ConfigOnly bool
	// Progress, if set, is called with the bytes of tensor data done so far
	// and the total; done == total once every shard is on disk.
	Progress func(done, total int64)
}

// fullShardBytes is the full preset's default shard size.
const fullShardBytes = 4 << 30

// Write generates the checkpoint described by opts into opts.Out. Options
// are checked before anything is created; on a later failure the files
// written so far are left in place (each one complete) and the error says
// which failed.
func Write(opts Options) error {
	layers, err := resolveLayers(opts.Preset, opts.Layers)
	if err != nil {
		return err
	}
	if opts.Out == "" {
		return errors.New("synth: no output directory")
	}
	if opts.ShardBytes < 0 {
		return fmt.Errorf("synth: shard size %d is negative", opts.ShardBytes)
	}
	tok, err := theTokenizer()
	if err != nil {
		return err
	}
	configJSON, err := ConfigJSON(opts.Preset, layers)
	if err != nil {
		return err
	}
	cfg, err := arch.ParseConfig(configJSON)
	if err != nil {
		return fmt.Errorf("synth: generated config.json: %w", err)
	}
	tensors, err := planTensors(cfg)
	if err != nil {
		return err
	}
	var total int64
	for _, t := range tensors {
		total += t.bytes()
	}
	limit := opts.ShardBytes
	if limit == 0 {
		limit = fullShardBytes
		if opts.Preset == PresetTiny {
			limit = (total + 3) / 4
		}
	}
	shards := planShards(tensors, limit)

	if err := prepareOut(opts.Out); err != nil {
		return err
	}
	files := []struct {
		name string
		data func() ([]byte, error)
	}{
		{"config.json", func() ([]byte, error) { return configJSON, nil }},
		{"tokenizer.json", tok.tokenizerJSON},
		{"tokenizer_config.json", tok.tokenizerConfigJSON},
		{"generation_config.json", tok.generationConfigJSON},
		{"chat_template.jinja", func() ([]byte, error) { return []byte(chatTemplate), nil }},
	}
	for _, f := range files {
		data, err := f.data()
		if err != nil {
			return fmt.Errorf("synth: %s: %w", f.name, err)
		}
		if err := writeFileAtomic(filepath.Join(opts.Out, f.name), data); err != nil {
			return err
		}
	}

	if opts.ConfigOnly {
		return nil
	}
	// One shard in memory at a time; the buffer is reused across shards.
	var maxShard int64
	for _, s := range shards {
		maxShard = max(maxShard, s.bytes)
	}
	buf := make([]byte, maxShard)
	weightMap := map[string]string{}
	var done int64
	for _, s := range shards {
		wts := make([]checkpoint.WriteTensor, len(s.tensors))
		var off int64
		for i, t := range s.tensors {
			data := buf[off : off+t.bytes() : off+t.bytes()]
			off += t.bytes()
			fillTensor(data, opts.Seed, t)
			wts[i] = checkpoint.WriteTensor{Name: t.name, DType: t.dtype, Shape: t.shape, Data: data}
			weightMap[t.name] = s.file
			if i < len(s.tensors)-1 {
				done += t.bytes()
				report(opts.Progress, done, total)
			}
		}
		if err := checkpoint.WriteFile(filepath.Join(opts.Out, s.file), wts, map[string]string{"format": "pt"}); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		done += s.tensors[len(s.tensors)-1].bytes()
		report(opts.Progress, done, total)
	}
	if err := checkpoint.WriteIndex(filepath.Join(opts.Out, checkpoint.IndexFile), total, weightMap); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// report calls the progress callback when there is one.
func report(progress func(done, total int64), done, total int64) {
	if progress != nil {
		progress(done, total)
	}
}

// prepareOut creates the output directory, or accepts an existing empty
// one; anything else is refused so no user file is overwritten.
func prepareOut(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("synth: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("synth: output %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("synth: output directory %s is not empty (%d entries); synth writes only into a new or empty directory", dir, len(entries))
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so an interrupted run never leaves a truncated file.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("synth: write %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
