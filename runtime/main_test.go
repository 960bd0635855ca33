package runtime_test

import (
	"math"
	"os"
	"testing"
)

// sharedTemp holds files the package's tests share (the tiny checkpoint).
var sharedTemp string

func makeTemp() (string, error) {
	if sharedTemp == "" {
		dir, err := os.MkdirTemp("", "runtime-test-")
		if err != nil {
			return "", err
		}
		sharedTemp = dir
	}
	return sharedTemp, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedTemp != "" {
		os.RemoveAll(sharedTemp)
	}
	os.Exit(code)
}

// klDivergence is KL(p‖q) of the softmaxes of two logit rows, in float64.
func klDivergence(p, q []float32) float64 {
	lp, lq := logSoftmax(p), logSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - m - math.Log(s)
	}
	return out
}
