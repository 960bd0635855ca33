package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// minParallelWork is roughly how many multiply-adds a goroutine must get
// before starting it pays off. A variable only so that tests can force the
// parallel paths on tiny inputs.
var minParallelWork = 1 << 15

// parallelFor calls fn on disjoint ranges [lo, hi) that cover [0, n), spread
// over up to runtime.GOMAXPROCS goroutines. cost is the approximate work of
// one item (in multiply-adds); small loops run serially on the caller's
// goroutine. Ranges are handed out dynamically (about four per goroutine) so
// that uneven items, such as causal attention rows, still balance.
func parallelFor(n, cost int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), n, max(1, n*max(cost, 1)/minParallelWork))
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunks := min(n, 4*workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				fn(c*n/chunks, (c+1)*n/chunks)
			}
		})
	}
	wg.Wait()
}
