package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aimaproject/aimac/runtime"
)

// benchCertified compares the two LM heads of greedy decoding at one
// context: the same state (a snapshot after the context's prefill)
// decoded --certified-steps times with device greedy sampling over the
// BF16 head's logits, then again with the certified int8 head. The tokens
// must be identical; the step times and the certificate's candidates are
// reported.
type benchCertified struct {
	Steps          int           `json:"steps"`
	Identical      bool          `json:"identical"`
	FirstDiff      int           `json:"first_diff"` // -1: none
	BF16Step       *benchSummary `json:"bf16_step_s"`
	Int8Step       *benchSummary `json:"int8_step_s"`
	Candidates     float64       `json:"candidates_mean"`
	MaxCandidates  int64         `json:"candidates_max"`
	Fallbacks      int64         `json:"fallbacks"`
	SavedUSPerStep float64       `json:"saved_us_per_step"`
}

// certified runs the comparison after a prefill whose last logits are
// given, then restores the state the comparison started from.
func (b *bench) certified(ctx context.Context, log io.Writer, d *benchDecode, logits []float32) error {
	n := b.f.certifiedSteps
	if n == 0 || !b.e.CanSample() {
		return nil
	}
	snap, err := b.e.Snapshot(logits)
	if err != nil {
		return err
	}
	was := b.e.CertifiedHead()
	defer b.e.SetCertifiedHead(was)
	first := argmax(logits)
	run := func(on bool) ([]int32, []float64, error) {
		if _, err := b.e.Restore(snap); err != nil {
			return nil, nil, err
		}
		if err := b.e.SetCertifiedHead(on); err != nil {
			return nil, nil, err
		}
		tok, toks, secs := first, []int32{}, []float64{}
		for i := range n {
			t := time.Now()
			next, _, err := b.e.DecodeSampled(ctx, tok, runtime.DeviceSampling{}, i)
			if err != nil {
				return nil, nil, err
			}
			secs = append(secs, round(time.Since(t).Seconds(), 6))
			toks, tok = append(toks, next), next
		}
		return toks, secs, nil
	}
	want, bf16S, err := run(false)
	if err != nil {
		return fmt.Errorf("BF16 head: %w", err)
	}
	before := b.e.HeadStats()
	got, int8S, err := run(true)
	if err != nil {
		if err == runtime.ErrNoCertifiedHead {
			b.skip(fmt.Sprintf("certified head at %d: the plan has none", d.Context))
			return nil
		}
		return fmt.Errorf("certified head: %w", err)
	}
	st := b.e.HeadStats()
	c := &benchCertified{Steps: n, Identical: slices.Equal(want, got), FirstDiff: -1, BF16Step: summarize(bf16S), Int8Step: summarize(int8S),
		Candidates:    round(float64(st.Candidates-before.Candidates)/float64(n), 2),
		MaxCandidates: st.MaxCandidates, Fallbacks: st.Fallbacks - before.Fallbacks}
	for i := range want {
		if want[i] != got[i] {
			c.FirstDiff = i
			break
		}
	}
	c.SavedUSPerStep = round((c.BF16Step.Median-c.Int8Step.Median)*1e6, 1)
	d.Certified = c
	fmt.Fprintf(log, "[%.0fs] certified head at %d: %d steps, identical %v, median %.3f ms (BF16 %.3f ms), %.1f candidates a step, %d fallbacks\n",
		time.Since(b.start).Seconds(), d.Context, n, c.Identical, c.Int8Step.Median*1e3, c.BF16Step.Median*1e3, c.Candidates, c.Fallbacks)
	if _, err := b.e.Restore(snap); err != nil {
		return err
	}
	if !c.Identical {
		return fmt.Errorf("certified head at %d: the greedy tokens differ from the BF16 head's at step %d", d.Context, c.FirstDiff)
	}
	return nil
}
