// Package kernels holds the CPU reference kernels of the qwen3_5_moe forward
// pass (docs/model.md, SPEC §2–§5).
//
// Each kernel is a plain, readable FP32 implementation of one formula of the
// SPEC. Together they are the oracle every GPU kernel is tested against, and
// the CPU backend runs the whole model with them. Matrix weights arrive as
// BF16 bit patterns ([]uint16, widened on the fly); small parameters (norm
// and conv weights, A_log, dt_bias), activations, recurrent state and the KV
// cache are []float32.
//
// Conventions shared by every kernel:
//   - n is the logical number of tokens (rows) of the step. Buffers may be
//     larger (sized for a bucket); rows ≥ n are neither read nor written, so
//     padding never advances a recurrent state nor enters the KV cache.
//   - Shapes are row-major and documented per kernel; the caller sizes the
//     buffers and validates indices, so kernels do not return errors.
//   - Large kernels spread their work over runtime.GOMAXPROCS goroutines
//     (matmul over output columns or rows, attention and the delta rule over
//     heads, MoE over experts); results do not depend on the split.
package kernels
