package runtime

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		in   []float32
		want int32
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 5, 1}, 0}, // first of equal maxima, as torch.argmax
		{[]float32{nan, 1, 2}, 2},
		{[]float32{-1}, 0},
	}
	for _, tt := range tests {
		if got := Argmax(tt.in); got != tt.want {
			t.Errorf("Argmax(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestSampler(t *testing.T) {
	logits := []float32{0.5, 2, 1.9, -1, 10}
	draw := func(c SamplerConfig, n int) []int32 {
		s, err := NewSampler(c)
		if err != nil {
			t.Fatal(err)
		}
		var out []int32
		for i := 0; i < n; i++ {
			out = append(out, s.Sample(logits))
		}
		return out
	}
	tests := []struct {
		name string
		c    SamplerConfig
		want []int32
	}{
		{"greedy", SamplerConfig{}, []int32{4, 4, 4}},
		{"vocab limit masks padding ids", SamplerConfig{VocabLimit: 4}, []int32{1, 1, 1}},
		{"top-k 1 is greedy", SamplerConfig{Temperature: 5, TopK: 1, Seed: 3}, []int32{4, 4, 4}},
		{"tiny top-p is greedy", SamplerConfig{Temperature: 1, TopP: 1e-9, Seed: 3}, []int32{4, 4, 4}},
		{"top-k 2 under a limit", SamplerConfig{Temperature: 1000, TopK: 2, VocabLimit: 4, Seed: 7}, nil},
	}
	for _, tt := range tests {
		got := draw(tt.c, 3)
		if tt.want == nil {
			for _, id := range got {
				if id != 1 && id != 2 {
					t.Errorf("%s: drew %d, want 1 or 2", tt.name, id)
				}
			}
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// Seeded sampling is reproducible and the seed matters.
	hot := SamplerConfig{Temperature: 100, Seed: 42}
	a, b := draw(hot, 64), draw(hot, 64)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different draws:\n%s", diff)
	}
	hot.Seed = 43
	if cmp.Equal(a, draw(hot, 64)) {
		t.Error("a different seed gave the same 64 draws")
	}
}

func TestSamplerFrequencies(t *testing.T) {
	// At temperature 1, draws follow the softmax.
	logits := []float32{0, float32(math.Log(3))}
	s, err := NewSampler(SamplerConfig{Temperature: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ones := 0
	const n = 20000
	for i := 0; i < n; i++ {
		ones += int(s.Sample(logits))
	}
	if f := float64(ones) / n; math.Abs(f-0.75) > 0.02 {
		t.Errorf("token 1 drawn %.3f of the time, want 0.75", f)
	}
}

func TestSamplerConfigErrors(t *testing.T) {
	tests := []struct {
		c    SamplerConfig
		want string
	}{
		{SamplerConfig{Temperature: -1}, "temperature"},
		{SamplerConfig{Temperature: math.Inf(1)}, "temperature"},
		{SamplerConfig{TopK: -2}, "top_k"},
		{SamplerConfig{TopP: 1.5}, "top_p"},
		{SamplerConfig{VocabLimit: -1}, "vocab limit"},
	}
	for _, tt := range tests {
		if _, err := NewSampler(tt.c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.c, err, tt.want)
		}
	}
}

func TestSegments(t *testing.T) {
	tests := []struct {
		n       int
		buckets []int
		want    []Segment
	}{
		{1, []int{4, 16}, []Segment{{0, 1, 4}}},
		{4, []int{4, 16}, []Segment{{0, 4, 4}}},
		{5, []int{4, 16}, []Segment{{0, 5, 16}}},
		{16, []int{4, 16}, []Segment{{0, 16, 16}}},
		{17, []int{4, 16}, []Segment{{0, 16, 16}, {16, 1, 4}}},
		{37, []int{4, 16}, []Segment{{0, 16, 16}, {16, 16, 16}, {32, 5, 16}}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Segments(tt.n, tt.buckets)); diff != "" {
			t.Errorf("Segments(%d, %v) (-want +got):\n%s", tt.n, tt.buckets, diff)
		}
	}
}

func TestPenaltiesAndMinP(t *testing.T) {
	logits := []float32{3, 2.9, 1, -1}
	s, err := NewSampler(SamplerConfig{PresencePenalty: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Greedy picks 0, then the presence penalty moves it below token 1.
	if got := []int32{s.Sample(logits), s.Sample(logits)}; !cmp.Equal(got, []int32{0, 1}) {
		t.Errorf("presence penalty: drew %v, want [0 1]", got)
	}
	r, _ := NewSampler(SamplerConfig{RepetitionPenalty: 2})
	r.SetPrompt([]int32{0})
	if got := r.Sample(logits); got != 1 {
		t.Errorf("repetition penalty on a prompt token: drew %d, want 1", got)
	}
	// min_p 0.5 at temperature 1 keeps only tokens 0 and 1.
	m, _ := NewSampler(SamplerConfig{Temperature: 1, MinP: 0.5, Seed: 9})
	for i := 0; i < 200; i++ {
		if id := m.Sample(logits); id > 1 {
			t.Fatalf("min_p drew %d", id)
		}
	}
}

func TestLogprobs(t *testing.T) {
	s, _ := NewSampler(SamplerConfig{})
	id, lp := s.SampleLogprobs([]float32{0, float32(math.Log(3)), -50}, 2)
	if id != 1 || math.Abs(lp.Logprob-math.Log(0.75)) > 1e-6 {
		t.Errorf("got id %d logprob %v, want 1 and log(0.75)", id, lp.Logprob)
	}
	if len(lp.Top) != 2 || lp.Top[0].ID != 1 || lp.Top[1].ID != 0 {
		t.Errorf("top alternatives %+v", lp.Top)
	}
	got := TopLogprobs([]float64{-1, -3, -0.5, -3, -2}, 3)
	want := []Alternative{{2, -0.5}, {0, -1}, {4, -2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TopLogprobs (-want +got):\n%s", diff)
	}
}

// maskOf is the Mask of ids over a vocabulary of n.
func maskOf(n int, ids ...int32) Mask {
	m := make(Mask, MaskWords(n))
	for _, id := range ids {
		m[id/32] |= 1 << (id % 32)
	}
	return m
}

func TestSampleMasked(t *testing.T) {
	logits := make([]float32, 70) // two mask words and a part
	for i := range logits {
		logits[i] = float32(i % 7)
	}
	tests := []struct {
		name    string
		c       SamplerConfig
		mask    Mask
		allowed []int32 // nil: the draw must fail with ErrMaskEmpty
	}{
		{"greedy picks the best allowed id", SamplerConfig{}, maskOf(70, 3, 33, 64), []int32{33}},
		{"hot sampling stays inside the mask", SamplerConfig{Temperature: 2, Seed: 9}, maskOf(70, 0, 31, 32, 69), []int32{0, 31, 32, 69}},
		{"top-k counts allowed ids only", SamplerConfig{Temperature: 1, TopK: 1, Seed: 1}, maskOf(70, 1, 2), []int32{2}},
		{"nil mask allows everything", SamplerConfig{}, nil, []int32{6}},
		{"the vocabulary limit still masks", SamplerConfig{VocabLimit: 60}, maskOf(70, 64), nil},
		{"an empty mask fails", SamplerConfig{}, maskOf(70), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSampler(tt.c)
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				id, err := s.SampleMasked(logits, tt.mask)
				if tt.allowed == nil {
					if err != ErrMaskEmpty {
						t.Fatalf("SampleMasked = %d, %v; want ErrMaskEmpty", id, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !containsID(tt.allowed, id) {
					t.Fatalf("drew %d, want one of %v", id, tt.allowed)
				}
			}
		})
	}
}

// TestSampleLogprobsMasked checks that logprobs stay the model's own
// distribution while the draw obeys the mask.
func TestSampleLogprobsMasked(t *testing.T) {
	logits := []float32{0, 3, 1, 2}
	s, err := NewSampler(SamplerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	id, lp, err := s.SampleLogprobsMasked(logits, 2, maskOf(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	want := LogSoftmax(logits)
	got := TokenLogprob{ID: id, Logprob: lp.Logprob, Top: lp.Top}
	if diff := cmp.Diff(TokenLogprob{ID: 2, Logprob: want[2], Top: []Alternative{{1, want[1]}, {3, want[3]}}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
