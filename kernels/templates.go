package kernels

import "embed"

// Templates holds the GPU kernel templates, one per op family
// (<family>.tmpl), plus common.tmpl with the dialect-neutral helpers every
// kernel shares. Package codegen renders them per dialect and plan kernel.
//
//go:embed *.tmpl
var Templates embed.FS

// Helpers are the template files that belong to no family: only
// {{define}}s that family templates include.
var Helpers = []string{"common.tmpl", "gdn_mma.tmpl", "gdn_recurrence.tmpl", "matmul_dot.tmpl", "gemv_stream.tmpl", "rope_sincos.tmpl", "qk_fold.tmpl", "mma.tmpl", "wgmma.tmpl", "gemm_tile.tmpl", "gemm_wgmma.tmpl", "gemm_wgmma_ws.tmpl", "moe_route.tmpl", "moe_decode_gate_up_kernel.tmpl", "gdn_split_common.tmpl"}
