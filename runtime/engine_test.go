package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/synth"
)

var (
	tinyOnce sync.Once
	tinyDir  string
	tinyErr  error
)

// tiny writes the synthetic tiny checkpoint once per test binary.
func tiny(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		dir, err := makeTemp()
		if err != nil {
			tinyErr = err
			return
		}
		tinyDir = filepath.Join(dir, "tiny")
		tinyErr = synth.Write(synth.Options{Preset: "tiny", Seed: 7, Out: tinyDir})
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyDir
}

func open(t *testing.T, buckets []int, ctx int) *loader.Loaded {
	t.Helper()
	l, err := loader.Open(loader.Options{ModelDir: tiny(t), Buckets: buckets, ContextTokens: ctx})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// prompt is a deterministic pseudo-random prompt (not one repeated token).
func prompt(n, vocab int) []int32 {
	out := make([]int32, n)
	x := uint32(12345)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = int32(x>>8) % int32(vocab)
	}
	return out
}

// teacherForced returns the logits of every prompt position.
func teacherForced(t *testing.T, e *runtime.Engine, tokens []int32) [][]float32 {
	t.Helper()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	out := make([][]float32, len(tokens))
	_, err := e.Prefill(context.Background(), tokens, func(start int, rows [][]float32) error {
		for i, r := range rows {
			out[start+i] = append([]float32(nil), r...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func compareRows(t *testing.T, what string, want, got [][]float32) {
	t.Helper()
	var maxKL float64
	for i := range want {
		maxKL = math.Max(maxKL, klDivergence(want[i], got[i]))
		if runtime.Argmax(want[i]) != runtime.Argmax(got[i]) {
			t.Errorf("%s: top-1 differs at position %d", what, i)
		}
	}
	if maxKL > 1e-4 {
		t.Errorf("%s: max KLD %.3g > 1e-4", what, maxKL)
	}
}

// TestBucketComposition: prompts of every length around the bucket and
// chunk edges, run as compositions of small buckets with a masked tail and
// then decoded further, give the single-shot logits: padding rows never
// touch the state the decode steps read.
func TestBucketComposition(t *testing.T) {
	single := open(t, []int{256}, 512)
	composed := open(t, []int{8, 32}, 512)
	V := single.Engine.Vocab()
	const decoded = 3
	for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 97, 130} {
		seq := prompt(n+decoded, V)
		want := teacherForced(t, single.Engine, seq)
		got := teacherForced(t, composed.Engine, seq[:n])
		for _, tok := range seq[n:] {
			l, err := composed.Engine.Decode(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, l)
		}
		compareRows(t, fmt.Sprintf("%d tokens composed, then decoded", n), want[:n+decoded-1], got[:n+decoded-1])
	}
}

// TestDecodeMatchesPrefill: decoding token by token gives the logits that
// teacher-forced prefill gives for the same sequence.
func TestDecodeMatchesPrefill(t *testing.T) {
	l := open(t, []int{16, 64}, 256)
	V := l.Engine.Vocab()
	seq := prompt(40, V)
	want := teacherForced(t, l.Engine, seq)
	if err := l.Engine.Reset(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got := make([][]float32, len(seq))
	last, err := l.Engine.Prefill(ctx, seq[:20], nil)
	if err != nil {
		t.Fatal(err)
	}
	got[19] = last
	for i := 20; i < len(seq); i++ {
		if got[i], err = l.Engine.Decode(ctx, seq[i]); err != nil {
			t.Fatal(err)
		}
	}
	compareRows(t, "decode vs prefill", want[19:], got[19:])
	if l.Engine.Position() != len(seq) {
		t.Errorf("position %d, want %d", l.Engine.Position(), len(seq))
	}
}

func TestEngineErrors(t *testing.T) {
	l := open(t, []int{8}, 16)
	e := l.Engine
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"empty prompt", func() error { _, err := e.Prefill(ctx, nil, nil); return err }, "empty prompt"},
		{"token outside the vocabulary", func() error { _, err := e.Prefill(ctx, []int32{1, int32(e.Vocab())}, nil); return err }, "outside the vocabulary"},
		{"negative token", func() error { _, err := e.Decode(ctx, -1); return err }, "outside the vocabulary"},
		{"context full", func() error { _, err := e.Prefill(ctx, prompt(17, e.Vocab()), nil); return err }, "context full"},
	}
	for _, tt := range tests {
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		if err := tt.run(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestCancelMidPrefill: a prefill cancelled between segments leaves the
// engine refusing work until Reset, after which results equal a cold run.
func TestCancelMidPrefill(t *testing.T) {
	l := open(t, []int{8}, 64)
	e := l.Engine
	p := prompt(30, e.Vocab())
	want := teacherForced(t, e, p)
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := e.Prefill(ctx, p, func(int, [][]float32) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled prefill returned %v", err)
	}
	if _, err := e.Prefill(context.Background(), p, nil); !errors.Is(err, runtime.ErrBroken) {
		t.Fatalf("prefill after a cancelled one returned %v, want ErrBroken", err)
	}
	compareRows(t, "after reset", want, teacherForced(t, e, p))
}
