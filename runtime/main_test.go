package runtime_test

import (
	"math"
	"os"
	"testing"

	"github.com/aimaproject/aimac/runtime"
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
	lp, lq := runtime.LogSoftmax(p), runtime.LogSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}
