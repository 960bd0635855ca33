package kernels

import "runtime"

// matmulRowBlock is how many rows of x one pass over the weights serves: a
// block of x stays in cache while each weight row is widened once for it.
const matmulRowBlock = 64

// MatMul: y[r*n+j] = Σ_k x[r*k+kk] * W[j*k+kk]  (W is BF16 row-major [n][k], like a torch Linear weight), r < rows.
// It is every bias-free Linear layer of the model (SPEC §2.3, §3, §4, §5), accumulated in FP32.
func MatMul(y, x []float32, w []uint16, rows, k, n int) {
	if rows <= 0 || n <= 0 {
		return
	}
	// Split the output columns among goroutines, unless there are too few
	// of them (router and gate projections on a long prefill): then rows.
	if n >= 4*runtime.GOMAXPROCS(0) || n >= rows {
		parallelFor(n, rows*k, func(lo, hi int) {
			matmulTile(y, x, w, 0, rows, lo, hi, k, n)
		})
		return
	}
	parallelFor(rows, n*k, func(lo, hi int) {
		matmulTile(y, x, w, lo, hi, 0, n, k, n)
	})
}

// matmulTile computes y[r][j] for r in [r0, r1) and j in [j0, j1) of MatMul.
func matmulTile(y, x []float32, w []uint16, r0, r1, j0, j1, k, n int) {
	if r1-r0 < 4 {
		// Few rows: read the BF16 weights directly.
		for j := j0; j < j1; j++ {
			wj := w[j*k:][:k]
			for r := r0; r < r1; r++ {
				y[r*n+j] = dotBF16(x[r*k:][:k], wj)
			}
		}
		return
	}
	wide := make([]float32, k)
	for rb := r0; rb < r1; rb += matmulRowBlock {
		re := min(rb+matmulRowBlock, r1)
		for j := j0; j < j1; j++ {
			for i, h := range w[j*k:][:k] {
				wide[i] = widen(h)
			}
			for r := rb; r < re; r++ {
				y[r*n+j] = dot(x[r*k:][:k], wide)
			}
		}
	}
}
