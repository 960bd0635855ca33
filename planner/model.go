// Package planner lowers a qwen3_5_moe checkpoint description to IR graphs,
// one per step (each prefill bucket, the decode step, the logits pass), and
// turns them into a plan: kernels specialized per target, buffers with
// roles and lifetimes, arena offsets and ordered launches.
package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/checkpoint"
)

// Model is what the planner needs to know of a checkpoint: the config and
// each text-model tensor's stored dtype.
type Model struct {
	Name   string
	Config *arch.Config
	// DTypes maps tensor names relative to the model prefix ("embed_tokens.weight",
	// "layers.0.linear_attn.A_log", and "lm_head.weight") to stored dtypes.
	DTypes map[string]arch.DType
}

// FromConfig describes a model from its config alone, assuming the dtypes
// Qwen ships (the first each tensor spec accepts): how plans for the real
// model are made without its 69 GB of weights.
func FromConfig(name string, cfg *arch.Config) *Model {
	m := &Model{Name: name, Config: cfg, DTypes: map[string]arch.DType{}}
	for _, t := range cfg.Tensors("") {
		m.DTypes[t.Name] = t.DTypes[0]
	}
	return m
}

// FromCheckpoint describes a validated checkpoint.
func FromCheckpoint(name string, ck *checkpoint.Checkpoint) (*Model, error) {
	m := &Model{Name: name, Config: ck.Config, DTypes: map[string]arch.DType{}}
	for _, t := range ck.Config.Tensors("") {
		info, err := ck.Resolve(t.Name)
		if err != nil {
			return nil, err
		}
		m.DTypes[t.Name] = info.DType
	}
	return m, nil
}

// Fingerprint identifies the model: sha256 over the canonical config and the
// text model's tensor table (name, stored dtype, shape). Two checkpoints with
// the same fingerprint run with the same plan.
func (m *Model) Fingerprint() string {
	h := sha256.New()
	h.Write(m.Config.Canonical())
	h.Write([]byte{'\n'})
	for _, t := range m.Config.Tensors("") {
		fmt.Fprintf(h, "%s %s %v\n", t.Name, m.DTypes[t.Name], t.Shape)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// lmHead names the LM head's weight: its own tensor, or the embedding when tied.
func (m *Model) lmHead() string {
	if m.Config.TieWordEmbeddings {
		return "embed_tokens.weight"
	}
	return arch.LMHead
}
