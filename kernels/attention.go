package kernels

import "math"

// RoPE (SPEC §2.4): NeoX rotate-half on the first rotDim dims of each head, in place; row t (position pos0+t) of head h starts at
// t*rowStride + h*headDim. Compute like HF does in fp32: inv_freq[j] = float32(1 / theta^(2j/rotDim)) (the power evaluated in float32
// like torch does), angle = float32(pos) * inv_freq[j] rounded to float32, cos/sin of that float32 angle.
// Text-only positions make the interleaved M-RoPE of the model plain NeoX RoPE on the first rotDim dims.
func RoPE(x []float32, rowStride, n, heads, headDim, rotDim, pos0 int, theta float64) {
	half := rotDim / 2
	invFreq := ropeInvFreq(rotDim, theta)
	parallelFor(n, 2*heads*rotDim+8*half, func(lo, hi int) {
		cos := make([]float32, half)
		sin := make([]float32, half)
		for t := lo; t < hi; t++ {
			pos := float32(pos0 + t)
			for j, f := range invFreq {
				angle := float64(pos * f)
				cos[j] = float32(math.Cos(angle))
				sin[j] = float32(math.Sin(angle))
			}
			for h := range heads {
				v := x[t*rowStride+h*headDim:][:rotDim]
				for j := range half {
					a, b := v[j], v[j+half]
					v[j] = a*cos[j] - b*sin[j]
					v[j+half] = b*cos[j] + a*sin[j]
				}
			}
		}
	})
}

// ropeInvFreq returns inv_freq[j] = 1 / theta^(2j/rotDim) for j < rotDim/2,
// evaluated in float32 steps as torch does (exponent, power, reciprocal).
func ropeInvFreq(rotDim int, theta float64) []float32 {
	base := float64(float32(theta))
	inv := make([]float32, rotDim/2)
	for j := range inv {
		exponent := float32(2*j) / float32(rotDim)
		power := float32(math.Pow(base, float64(exponent)))
		inv[j] = 1 / power
	}
	return inv
}

// KVAppend writes n rows of width `width` (kvHeads*headDim) of k and v into the caches at positions pos0..pos0+n-1.
// It stores post-norm, post-RoPE keys and values for the later decode steps (SPEC §2.3 step 4).
func KVAppend(kCache, vCache, k, v []float32, n, pos0, width int) {
	if n <= 0 {
		return
	}
	copy(kCache[pos0*width:(pos0+n)*width], k[:n*width])
	copy(vCache[pos0*width:(pos0+n)*width], v[:n*width])
}

// Attention (SPEC §2.3 step 5): causal GQA over the cache. q: [n][hq][d] (row stride hq*d); caches: [capacity][hkv][d];
// query t (absolute position pos0+t) attends to cache positions 0..pos0+t; query head h uses kv head h/(hq/hkv); softmax in fp32
// (subtract the max) with `scale`; out: [n][hq][d].
// It is the eager softmax(q·kᵀ·scale)·v of gated full attention; out may alias q.
func Attention(out, q, kCache, vCache []float32, n, pos0, hq, hkv, d int, scale float32) {
	if n <= 0 {
		return
	}
	group := hq / hkv
	ctx := pos0 + n
	parallelFor(n*hq, 2*ctx*d, func(lo, hi int) {
		scores := make([]float32, ctx)
		acc := make([]float32, d)
		for item := lo; item < hi; item++ {
			t, h := item/hq, item%hq
			kvh := h / group
			qv := q[item*d:][:d]
			length := pos0 + t + 1
			sc := scores[:length]
			maxScore := float32(math.Inf(-1))
			for p := range sc {
				sc[p] = dot(qv, kCache[(p*hkv+kvh)*d:][:d]) * scale
				maxScore = max(maxScore, sc[p])
			}
			var sum float32
			for p := range sc {
				sc[p] = expf(sc[p] - maxScore)
				sum += sc[p]
			}
			clear(acc)
			for p := range sc {
				axpy(acc, sc[p]/sum, vCache[(p*hkv+kvh)*d:][:d])
			}
			copy(out[item*d:][:d], acc)
		}
	})
}
