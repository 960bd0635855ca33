package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// softmaxT is softmax(logits/T) in float64 over the first n ids.
func softmaxT(logits []float32, t float64) []float64 {
	m := math.Inf(-1)
	for _, l := range logits {
		m = math.Max(m, float64(l)/t)
	}
	p := make([]float64, len(logits))
	var s float64
	for i, l := range logits {
		p[i] = math.Exp(float64(l)/t - m)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	return p
}

// draws samples n times under one seed, a step each, and counts the ids.
func draws(logits []float32, p SampleParams, n int) []int {
	counts := make([]int, len(logits))
	for step := range n {
		p.Step = uint32(step)
		id, _ := SampleToken(logits, p)
		counts[id]++
	}
	return counts
}

// chiSquare is Σ (observed − expected)² / expected over ids expected to
// appear; an id drawn although its probability is 0 is reported.
func chiSquare(t *testing.T, counts []int, want []float64) float64 {
	t.Helper()
	n := 0
	for _, c := range counts {
		n += c
	}
	var x float64
	for i, c := range counts {
		e := want[i] * float64(n)
		if e == 0 {
			if c != 0 {
				t.Errorf("id %d drawn %d times, its probability is 0", i, c)
			}
			continue
		}
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

func randomLogits(rng *rand.Rand, n int, scale float64) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(rng.NormFloat64() * scale)
	}
	return l
}

func argmax(l []float32) int32 {
	best := 0
	for i, v := range l {
		if v > l[best] {
			best = i
		}
	}
	return int32(best)
}

func TestSampleGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		l := randomLogits(rng, 1000, 3)
		id, lp := SampleToken(l, SampleParams{Seed: rng.Uint64(), TopK: 5, TopP: 0.5})
		if want := argmax(l); id != want {
			t.Fatalf("greedy chose %d, argmax is %d", id, want)
		}
		want := float64(l[id]) - logSumExp(l)
		if math.Abs(float64(lp)-want) > 1e-5 {
			t.Errorf("logprob %g, want %g", lp, want)
		}
	}
	// Ties go to the lower id; NaN is never the maximum.
	nan := float32(math.NaN())
	if id, _ := SampleToken([]float32{nan, 1, 3, 3, nan}, SampleParams{}); id != 2 {
		t.Errorf("ties: chose %d, want 2", id)
	}
	if id, _ := SampleToken([]float32{nan, nan}, SampleParams{Temperature: 1}); id != 0 {
		t.Errorf("all NaN: chose %d, want 0", id)
	}
	// A temperature too small to invert is greedy too.
	l := []float32{1, 5, 2}
	if id, _ := SampleToken(l, SampleParams{Temperature: 1e-45, Seed: 3}); id != 1 {
		t.Errorf("tiny temperature: chose %d, want 1", id)
	}
}

func logSumExp(l []float32) float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range l {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

// TestSampleFrequencies: draws over many steps follow softmax(logits/T),
// and the logprob stays the temperature-1 one.
func TestSampleFrequencies(t *testing.T) {
	l := []float32{1.5, 0.2, -0.7, 2.1, 0.9, -2, 1.1}
	for _, temp := range []float32{0.6, 1, 2.5} {
		p := SampleParams{Temperature: temp, Seed: 99}
		counts := draws(l, p, 40000)
		// 6 degrees of freedom: P(χ² > 40) < 1e-6.
		if x := chiSquare(t, counts, softmaxT(l, float64(temp))); x > 40 {
			t.Errorf("T=%g: χ² = %.1f over %v", temp, x, counts)
		}
		id, lp := SampleToken(l, p)
		if want := float64(l[id]) - logSumExp(l); math.Abs(float64(lp)-want) > 1e-5 {
			t.Errorf("T=%g: logprob %g, want %g", temp, lp, want)
		}
	}
}

// TestSampleCutsToArgmax: top_k 1, a tiny top_p and min_p 1 leave the
// argmax only, for any seed and step.
func TestSampleCutsToArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		l := randomLogits(rng, 500, 1)
		want := argmax(l)
		for _, p := range []SampleParams{{TopK: 1}, {TopP: 1e-6}, {MinP: 1}} {
			p.Temperature, p.Seed, p.Step = 2, rng.Uint64(), uint32(i)
			if id, _ := SampleToken(l, p); id != want {
				t.Fatalf("%+v chose %d, argmax is %d", p, id, want)
			}
		}
	}
}

// TestSampleTopK: only the k largest are drawn, in proportion; ties at the
// cut keep the lower ids.
func TestSampleTopK(t *testing.T) {
	l := []float32{0.5, 2, -1, 1.5, 1.9, 0}
	counts := draws(l, SampleParams{Temperature: 1, TopK: 3, Seed: 5}, 30000)
	want := softmaxT([]float32{2, 1.5, 1.9}, 1)
	if x := chiSquare(t, counts, []float64{0, want[0], 0, want[1], want[2], 0}); x > 35 {
		t.Errorf("top_k 3: χ² = %.1f over %v", x, counts)
	}
	flat := make([]float32, 10)
	counts = draws(flat, SampleParams{Temperature: 1, TopK: 4, Seed: 6}, 4000)
	for i, c := range counts {
		if (i < 4) != (c > 0) {
			t.Errorf("top_k 4 of equal logits: id %d drawn %d times", i, c)
		}
	}
}

// TestSampleTopP: the shortest prefix reaching p, normalized within the
// top_k set as the host sampler does.
func TestSampleTopP(t *testing.T) {
	probs := []float64{0.05, 0.5, 0.15, 0.3}
	l := make([]float32, len(probs))
	for i, p := range probs {
		l[i] = float32(math.Log(p))
	}
	// 0.5 < 0.7 ≤ 0.5 + 0.3: ids 1 and 3.
	counts := draws(l, SampleParams{Temperature: 1, TopP: 0.7, Seed: 7}, 20000)
	if x := chiSquare(t, counts, []float64{0, 0.625, 0, 0.375}); x > 30 {
		t.Errorf("top_p 0.7: χ² = %.1f over %v", x, counts)
	}
	// Within top_k 2 (ids 1 and 3: 0.625 and 0.375), top_p 0.6 keeps id 1.
	counts = draws(l, SampleParams{Temperature: 1, TopK: 2, TopP: 0.6, Seed: 8}, 500)
	if counts[1] != 500 {
		t.Errorf("top_k 2, top_p 0.6: %v, want id 1 only", counts)
	}
	// Just past 0.5 + 0.3, the third id joins.
	counts = draws(l, SampleParams{Temperature: 1, TopP: 0.81, Seed: 9}, 3000)
	if counts[0] != 0 || counts[1] == 0 || counts[2] == 0 || counts[3] == 0 {
		t.Errorf("top_p 0.81: %v, want ids 1, 2 and 3", counts)
	}
}

// TestSampleMinP: ids below min_p × the top probability are never drawn,
// every other one is.
func TestSampleMinP(t *testing.T) {
	probs := []float64{0.4, 0.1, 0.25, 0.05, 0.2}
	l := make([]float32, len(probs))
	for i, p := range probs {
		l[i] = float32(math.Log(p))
	}
	counts := draws(l, SampleParams{Temperature: 1, MinP: 0.45, Seed: 10}, 20000)
	want := []float64{0.4 / 0.85, 0, 0.25 / 0.85, 0, 0.2 / 0.85}
	if x := chiSquare(t, counts, want); x > 30 {
		t.Errorf("min_p 0.45: χ² = %.1f over %v", x, counts)
	}
}

// TestSampleVocabLimit: ids at or past the limit are never chosen and stay
// out of the logprob's normalizer.
func TestSampleVocabLimit(t *testing.T) {
	l := []float32{0.1, 1, 0.5, 9, 8}
	for _, temp := range []float32{0, 1, 3} {
		counts := draws(l, SampleParams{Temperature: temp, VocabLimit: 3, Seed: 11}, 2000)
		if counts[3] != 0 || counts[4] != 0 {
			t.Errorf("T=%g: padding ids drawn: %v", temp, counts)
		}
	}
	id, lp := SampleToken(l, SampleParams{VocabLimit: 3})
	if want := float64(l[1]) - logSumExp(l[:3]); id != 1 || math.Abs(float64(lp)-want) > 1e-6 {
		t.Errorf("greedy below the limit: %d, logprob %g; want 1, %g", id, lp, want)
	}
}

// TestSampleSeeded: the same seed and step draw the same id; another seed
// or the next steps draw others.
func TestSampleSeeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	l := randomLogits(rng, 2000, 0.5)
	seq := func(seed uint64) []int32 {
		var out []int32
		for step := range 32 {
			id, _ := SampleToken(l, SampleParams{Temperature: 1, TopP: 0.9, TopK: 500, Seed: seed, Step: uint32(step)})
			out = append(out, id)
		}
		return out
	}
	a, b, c := seq(42), seq(42), seq(43)
	distinct := map[int32]bool{}
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 step %d: %d then %d", i, a[i], b[i])
		}
		distinct[a[i]] = true
		if a[i] == c[i] {
			same++
		}
	}
	if len(distinct) < 20 {
		t.Errorf("32 steps drew only %d distinct ids", len(distinct))
	}
	if same > 4 {
		t.Errorf("seeds 42 and 43 agree on %d of 32 steps", same)
	}
}

// TestSampleKey: the order key sorts floats, −0 with +0.
func TestSampleKey(t *testing.T) {
	vals := []float32{float32(math.Inf(-1)), -3e38, -1, -1e-40, 0, 1e-40, 0.5, 1, 3e38, float32(math.Inf(1))}
	for i := 1; i < len(vals); i++ {
		if sampleKey(vals[i-1]) >= sampleKey(vals[i]) {
			t.Errorf("key(%g) ≥ key(%g)", vals[i-1], vals[i])
		}
	}
	if sampleKey(float32(math.Copysign(0, -1))) != sampleKey(0) {
		t.Error("−0 and +0 have different keys")
	}
	if SampleTarget(0.5, 3) != 2 || SampleTarget(0.5, 4) != 2 || SampleTarget(1e-30, 1<<40) != 1 {
		t.Error("SampleTarget is not ⌈p·z⌉")
	}
}

// TestSampleMask: a masked draw picks only allowed ids, whatever the
// cuts, and reports the unmasked logprob; a mask of every id changes
// nothing.
func TestSampleMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const V = 5000
	logits := make([]float32, V)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	all := make([]uint32, (V+31)/32)
	for i := range all {
		all[i] = ^uint32(0)
	}
	some := make([]uint32, len(all))
	for i := 0; i < V; i += 7 {
		some[i/32] |= 1 << (i % 32)
	}
	for _, p := range []SampleParams{{}, {Temperature: 1, Seed: 1}, {Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 2}, {Temperature: 1, MinP: 0.1, Seed: 3}} {
		for step := range 20 {
			p.Step = uint32(step)
			free, freeLP := SampleToken(logits, p)
			p.Mask = all
			id, lp := SampleToken(logits, p)
			if id != free || lp != freeLP {
				t.Errorf("%+v: all-ones mask draws %d (%g), no mask %d (%g)", p, id, lp, free, freeLP)
			}
			p.Mask = some
			id, lp = SampleToken(logits, p)
			p.Mask = nil
			if id%7 != 0 {
				t.Errorf("%+v: drew %d, outside the mask", p, id)
			}
			// The logprob is the model's own at the drawn id.
			_, want := SampleToken(logits, SampleParams{Temperature: 0, VocabLimit: 0})
			best := 0
			for i, l := range logits {
				if l > logits[best] {
					best = i
				}
			}
			if d := float64(lp - (logits[id] - logits[best]) - want); math.Abs(d) > 1e-5 {
				t.Errorf("%+v: logprob %g, want %g", p, lp, (logits[id]-logits[best])+want)
			}
		}
	}
}
