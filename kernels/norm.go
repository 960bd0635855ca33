package kernels

// RMSNorm (SPEC §2.2) on rows r < rows: y[r*yStride+i] = x[r*xStride+i] * rsqrt(mean_i(x²)+eps) * (onePlus ? 1+w[i] : w[i]), i < width.
// Used with rows=n (layer norms, width=hidden) and per head (q_norm from the interleaved q/gate projection: xStride=2*headDim).
// y may alias x when the strides are equal (in place).
func RMSNorm(y []float32, yStride int, x []float32, xStride int, w []float32, rows, width int, eps float32, onePlus bool) {
	w = w[:width]
	parallelFor(rows, 3*width, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xs := x[r*xStride:][:width]
			ys := y[r*yStride:][:width]
			inv := rsqrt(sumSquares(xs)/float32(width) + eps)
			for i, v := range xs {
				wi := w[i]
				if onePlus {
					wi = 1 + wi
				}
				ys[i] = v * inv * wi
			}
		}
	})
}

// GatedRMSNorm (SPEC §2.2, plain w): for each of rows (= n*heads) vectors of width d: y = w ⊙ (o * rsqrt(mean(o²)+eps)) ⊙ silu(z).
// It is linear_attn.norm, the output norm of Gated DeltaNet (SPEC §3 step 8); y may alias o.
func GatedRMSNorm(y, o, z, w []float32, rows, d int, eps float32) {
	w = w[:d]
	parallelFor(rows, 8*d, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			os := o[r*d:][:d]
			zs := z[r*d:][:d]
			ys := y[r*d:][:d]
			inv := rsqrt(sumSquares(os)/float32(d) + eps)
			for i, v := range os {
				ys[i] = w[i] * (v * inv) * silu(zs[i])
			}
		}
	})
}

// L2NormHeads (SPEC §3 step 5): for t < n and head h < heads, v = x[t*rowStride + h*dim : +dim]; v ← v / sqrt(Σv² + eps) * scale (in place).
// It normalizes the Gated DeltaNet queries (scale 1/sqrt(d_k)) and keys (scale 1).
func L2NormHeads(x []float32, rowStride, n, heads, dim int, eps, scale float32) {
	parallelFor(n, 3*heads*dim, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := range heads {
				v := x[t*rowStride+h*dim:][:dim]
				inv := rsqrt(sumSquares(v) + eps)
				for i := range v {
					v[i] = v[i] * inv * scale
				}
			}
		}
	})
}
