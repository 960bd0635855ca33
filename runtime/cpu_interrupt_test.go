package runtime

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// matmulCase is a MatMul launch big enough to run in several row blocks.
func matmulCase(t *testing.T, c *CPU) (k *plan.Kernel, args []Ref, y []float32, x []float32, w []uint16, rows, kk, n int) {
	t.Helper()
	rows, kk, n = 200, 64, 4096 // 64 rows a block
	alloc := func(bytes int) Mem {
		m, err := c.Alloc(int64(bytes))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ym, xm, wm := alloc(4*rows*n), alloc(4*rows*kk), alloc(2*n*kk)
	y, x, w = asF32(ym.(*hostMem).b), asF32(xm.(*hostMem).b), asU16(wm.(*hostMem).b)
	for i := range x {
		x[i] = float32(i%13) - 6
	}
	for i := range w {
		w[i] = uint16(0x3f80 + i%97) // BF16 values near 1
	}
	k = &plan.Kernel{Name: "mm", Family: string(ir.MatMul), Params: ir.Params{Ints: map[string]int64{"k": int64(kk), "n": int64(n)}}}
	return k, []Ref{{Mem: ym}, {Mem: xm}, {Mem: wm}}, y, x, w, rows, kk, n
}

// TestCPULaunchInterrupt checks that a long CPU launch stops between row
// blocks once the interrupt check fails, and that splitting a launch into
// blocks changes no bit of its result.
func TestCPULaunchInterrupt(t *testing.T) {
	stop := errors.New("stop")
	c := NewCPU()
	k, args, y, x, w, rows, kk, n := matmulCase(t, c)
	want := make([]float32, rows*n)
	kernels.MatMul(want, x, w, rows, kk, n)
	if err := c.Launch(k, &plan.Launch{}, args, rows, &Params{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, y); diff != "" {
		t.Fatalf("the blocked launch differs from one MatMul call:\n%s", diff)
	}

	clear(y)
	checks := 0
	c.SetInterrupt(func() error {
		checks++
		if checks > 1 { // the check before the launch passes, the first between blocks fails
			return stop
		}
		return nil
	})
	if err := c.Launch(k, &plan.Launch{}, args, rows, &Params{}); !errors.Is(err, stop) {
		t.Fatalf("Launch = %v, want the interrupt's error", err)
	}
	block := cpuBlockWork / (kk * n)
	if block >= rows {
		t.Fatalf("the case runs in one block of %d rows", block)
	}
	if diff := cmp.Diff(want[:block*n], y[:block*n]); diff != "" {
		t.Errorf("the first block was not computed:\n%s", diff)
	}
	if diff := cmp.Diff(make([]float32, (rows-block)*n), y[block*n:]); diff != "" {
		t.Errorf("rows after the interrupt were computed")
	}
	checks = 1
	if err := c.Launch(k, &plan.Launch{}, args, rows, &Params{}); !errors.Is(err, stop) {
		t.Errorf("a launch after the interrupt = %v, want the interrupt's error", err)
	}
}
