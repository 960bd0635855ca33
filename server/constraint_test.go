package server

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/output"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/synth"
	"github.com/aimaproject/aimac/tokenizer"
)

// tokenSet is a Constraint that allows a fixed set of tokens and records
// what it was told.
type tokenSet struct {
	ids      []int32
	masks    int
	advanced []int32
}

func (c *tokenSet) Mask(mask runtime.Mask) (bool, error) {
	c.masks++
	for _, id := range c.ids {
		mask[id/32] |= 1 << (id % 32)
	}
	return true, nil
}

func (c *tokenSet) Advance(tok int32) error {
	c.advanced = append(c.advanced, tok)
	return nil
}

// realModel is the tiny synthetic checkpoint on the CPU engine.
func realModel(t *testing.T) *Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loader.Open(loader.Options{ModelDir: dir, Buckets: []int{16, 64}, ContextTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	end, _ := tok.ID("<|im_end|>")
	return &Model{ID: "tiny", Engine: l.Engine, Tokenizer: tok, Template: tmpl, StopIDs: []int32{end}, VocabLimit: tok.Size()}
}

// TestConstraintRestrictsTokens checks the constraint hook on the real
// engine: hot sampling of the random tiny model draws only the allowed
// tokens, the constraint sees each one, and the same request without the
// constraint does not stay inside the set (so the check can fail).
func TestConstraintRestrictsTokens(t *testing.T) {
	t.Parallel()
	m := realModel(t)
	s := New(Config{})
	allowed := m.Tokenizer.Encode(" yes no maybe")
	gen := func(c Constraint) []int32 {
		p := genParams{prompt: m.Tokenizer.Encode("Answer: "), maxNew: 24, logprobs: true, parse: output.Options{Raw: true},
			sampler: runtime.SamplerConfig{Temperature: 1.5, Seed: 3, VocabLimit: m.VocabLimit}, constraint: c}
		res, err := s.generate(context.Background(), m, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for _, l := range res.logprobs {
			ids = append(ids, l.ID)
		}
		return ids
	}
	c := &tokenSet{ids: allowed}
	got := gen(c)
	if len(got) != 24 {
		t.Fatalf("%d tokens, want 24 (no stop token is allowed)", len(got))
	}
	for _, id := range got {
		if !slices.Contains(allowed, id) {
			t.Errorf("drew token %d outside the allowed %v", id, allowed)
		}
	}
	if c.masks != len(got) || !slices.Equal(c.advanced, got) {
		t.Errorf("the constraint was asked %d times and advanced by %v; the tokens were %v", c.masks, c.advanced, got)
	}
	free := gen(nil)
	if !slices.ContainsFunc(free, func(id int32) bool { return !slices.Contains(allowed, id) }) {
		t.Errorf("unconstrained, the model drew only allowed tokens %v: the test proves nothing", free)
	}
}

// TestConstraintAfterTheReasoning checks on the real engine that the
// constraint governs the answer only: the reasoning (four free tokens under
// a thinking budget) is drawn without it, the template's closing tokens
// are written by the budget, and every token after them is constrained.
func TestConstraintAfterTheReasoning(t *testing.T) {
	t.Parallel()
	m := realModel(t)
	s := New(Config{})
	prompt, apiErr := s.buildChatPrompt(m, chatInput{messages: []byte(`[{"role":"user","content":"Say yes or no."}]`)})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	if !prompt.parse.StartInReasoning {
		t.Fatal("the prompt does not open the reasoning")
	}
	c := &tokenSet{ids: m.Tokenizer.Encode(" yes no")}
	const budget, maxNew = 4, 20
	p := genParams{prompt: prompt.ids, maxNew: maxNew, parse: prompt.parse, constraint: c, think: newThinkBudget(m, budget, true),
		sampler: runtime.SamplerConfig{Temperature: 1.5, Seed: 5, VocabLimit: m.VocabLimit}}
	res, err := s.generate(context.Background(), m, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	closing := p.think.close
	answer := maxNew - budget - len(closing)
	if res.completionTokens != maxNew || res.reasoningTokens != budget+len(m.Tokenizer.Encode("\n</think>")) {
		t.Errorf("%d tokens, %d of them reasoning", res.completionTokens, res.reasoningTokens)
	}
	if c.masks != answer || len(c.advanced) != answer {
		t.Errorf("the constraint was asked %d times and advanced %d times, want %d (the answer's tokens)", c.masks, len(c.advanced), answer)
	}
	for _, id := range c.advanced {
		if !slices.Contains(c.ids, id) {
			t.Errorf("answer token %d is outside the allowed %v", id, c.ids)
		}
	}
	if want := m.Tokenizer.Encode("\n</think>\n\n"); !slices.Equal(closing, want) {
		t.Errorf("the template's reasoning close is %v, want the tokens of \\n</think>\\n\\n %v", closing, want)
	}
}

// TestThinkingBudgetOnBothSamplers checks the budget's forced close on the
// real engine through device sampling and host sampling: greedy, both give
// the same answer, with the reasoning closed after the budget.
func TestThinkingBudgetOnBothSamplers(t *testing.T) {
	t.Parallel()
	m := realModel(t)
	if ds, ok := m.Engine.(DeviceSampler); !ok || !ds.CanSample() {
		t.Fatal("the CPU engine does not sample on the device")
	}
	s := New(Config{})
	prompt, apiErr := s.buildChatPrompt(m, chatInput{messages: []byte(`[{"role":"user","content":"Think briefly."}]`)})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	run := func(host bool) *genResult {
		p := genParams{prompt: prompt.ids, maxNew: 16, parse: prompt.parse, think: newThinkBudget(m, 3, true),
			sampler: runtime.SamplerConfig{VocabLimit: m.VocabLimit}}
		if host {
			p.logprobs, p.topLogprobs = true, 1 // only the host sampler lists alternatives
		}
		if _, _, onDevice := deviceSampling(m, p); onDevice == host {
			t.Fatalf("host %v: the request samples on the device: %v", host, onDevice)
		}
		res, err := s.generate(context.Background(), m, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	dev, host := run(false), run(true)
	if diff := cmp.Diff(host.result, dev.result); diff != "" || dev.completionTokens != host.completionTokens {
		t.Errorf("device sampling differs from host sampling (-host +device, %d vs %d tokens):\n%s", host.completionTokens, dev.completionTokens, diff)
	}
	if want := 3 + len(m.Tokenizer.Encode("\n</think>")); dev.reasoningTokens != want {
		t.Errorf("%d reasoning tokens, want %d", dev.reasoningTokens, want)
	}
}
