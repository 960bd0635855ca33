package kernels_test

import (
	"io/fs"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// examples are small valid parameters of every family, run through its
// reference below; a family without one fails TestFamiliesComplete.
var examples = map[ir.Kind]ir.Params{
	ir.DecodePersistent:    {Ints: map[string]int64{"max_launches": 8}},
	ir.Embedding:           {Ints: map[string]int64{"hidden": 8, "vocab": 5}},
	ir.RMSNorm:             {Ints: map[string]int64{"width": 8, "heads": 2, "x_stride": 16, "y_stride": 8}, Reals: map[string]float64{"eps": 1e-6}, Flags: map[string]bool{"one_plus": true}},
	ir.MatMul:              {Ints: map[string]int64{"k": 8, "n": 3}},
	ir.MatMulAdd:           {Ints: map[string]int64{"k": 8, "n": 3}},
	ir.GEMM:                {Ints: map[string]int64{"k": 20, "n": 3, "tile_n": 128}, Flags: map[string]bool{"split_a": true, "split_a3": false, "wgmma": false, "wgmma_ws": false}},
	ir.GEMMAdd:             {Ints: map[string]int64{"k": 8, "n": 5, "tile_n": 128}, Flags: map[string]bool{"split_a": false, "split_a3": false, "wgmma": false, "wgmma_ws": false}},
	ir.MoESort:             {Ints: map[string]int64{"experts": 4, "k": 2}},
	ir.MoECount:            {Ints: map[string]int64{"experts": 4, "k": 2}},
	ir.MoEGateUpGroup:      {Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2}, Flags: map[string]bool{"split_a": true, "split_a3": false, "wgmma": false, "wgmma_ws": false}},
	ir.MoEDownGroup:        {Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2}, Flags: map[string]bool{"split_a": true, "split_a3": false, "wgmma": false, "wgmma_ws": false}},
	ir.MoESlotSum:          {Ints: map[string]int64{"experts": 4, "hidden": 8, "k": 2}},
	ir.CausalConv1dSiLU:    {Ints: map[string]int64{"channels": 6, "kernel": 4}},
	ir.GDNGates:            {Ints: map[string]int64{"heads": 2}},
	ir.L2NormHeads:         {Ints: map[string]int64{"row_stride": 16, "heads": 2, "dim": 4}, Reals: map[string]float64{"eps": 1e-6, "scale": 0.5}},
	ir.GatedDeltaChunked:   {Ints: map[string]int64{"row_stride": 24, "k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4, "chunk": 2}},
	ir.GatedDeltaRecurrent: {Ints: map[string]int64{"row_stride": 24, "k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4}},
	ir.GatedDeltaWY: {Ints: map[string]int64{"row_stride": 96, "k_heads": 1, "v_heads": 2, "k_dim": 32, "v_dim": 16, "chunk": 16, "slice": 16},
		Flags: map[string]bool{"split": true, "int_tf32": false}},
	ir.GatedDeltaState: {Ints: map[string]int64{"k_heads": 1, "v_heads": 2, "k_dim": 32, "v_dim": 16, "chunk": 16, "slice": 16, "cols": 8},
		Flags: map[string]bool{"split": true, "async": false, "int_tf32": true, "lo_acc": true, "pre_split": false}},
	ir.CausalConv1dSiLURows: {Ints: map[string]int64{"channels": 6, "kernel": 4, "rows_per_thread": 4}},
	ir.GatedRMSNorm:         {Ints: map[string]int64{"heads": 2, "dim": 4}, Reals: map[string]float64{"eps": 1e-6}},
	ir.GDNDecodeStep: {Ints: map[string]int64{"k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4, "kernel": 4},
		Reals: map[string]float64{"l2_eps": 1e-6, "q_scale": 0.5, "k_scale": 1, "eps": 1e-6}},
	ir.GDNDecodeSplit: {Ints: map[string]int64{"k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4, "kernel": 4, "col_tile": 2},
		Reals: map[string]float64{"l2_eps": 1e-6, "q_scale": 0.5, "k_scale": 1, "eps": 1e-6}},
	ir.GDNDecodePeer: {Ints: map[string]int64{"k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4, "kernel": 4, "col_tile": 2},
		Reals: map[string]float64{"l2_eps": 1e-6, "q_scale": 0.5, "k_scale": 1, "eps": 1e-6}},
	ir.GDNDecodeOut: {Ints: map[string]int64{"k_heads": 1, "v_heads": 2, "k_dim": 4, "v_dim": 4, "kernel": 4, "col_tile": 2, "hidden": 6},
		Reals: map[string]float64{"l2_eps": 1e-6, "q_scale": 0.5, "k_scale": 1, "eps": 1e-6}, Flags: map[string]bool{"stage": false}},
	ir.RoPE:      {Ints: map[string]int64{"row_stride": 16, "heads": 2, "head_dim": 8, "rot_dim": 4}, Reals: map[string]float64{"theta": 1e4}},
	ir.KVAppend:  {Ints: map[string]int64{"width": 8, "capacity": 6}, Flags: map[string]bool{"kv_bf16": false}},
	ir.Attention: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 8, "capacity": 6, "width": 8}, Reals: map[string]float64{"scale": 0.35}, Flags: map[string]bool{"kv_bf16": false}},
	ir.AttentionDecodeSplit: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 8, "capacity": 6, "width": 8, "splits": 3, "split_align": 1, "block_heads": 2},
		Reals: map[string]float64{"scale": 0.35}, Flags: map[string]bool{"kv_bf16": false}},
	ir.AttentionCombine: {Ints: map[string]int64{"q_heads": 2, "head_dim": 8, "splits": 3}},
	ir.AttentionDecodeStream: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 32, "capacity": 6, "width": 32, "splits": 3, "split_align": 1, "block_heads": 2},
		Reals: map[string]float64{"scale": 0.35}, Flags: map[string]bool{"kv_bf16": false}},
	ir.AttentionDecodeMMA: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 16, "capacity": 6, "width": 16, "splits": 3, "split_align": 1, "block_heads": 2, "warps": 2, "ring_stages": 1},
		Reals: map[string]float64{"scale": 0.35}, Flags: map[string]bool{"kv_bf16": true}},
	ir.AttentionDecodeMMAGate: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 16, "capacity": 6, "width": 16, "splits": 3, "split_align": 1, "block_heads": 2, "warps": 2, "ring_stages": 1},
		Reals: map[string]float64{"scale": 0.35}, Flags: map[string]bool{"kv_bf16": true}},
	ir.AttentionCombineGate: {Ints: map[string]int64{"q_heads": 2, "head_dim": 8, "splits": 3}},
	ir.AttentionDecodeSplitQK: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 8, "capacity": 6, "width": 8, "splits": 3, "split_align": 1, "block_heads": 2, "rot_dim": 4, "new_rows": 3},
		Reals: map[string]float64{"scale": 0.35, "eps": 1e-6, "theta": 1e4}, Flags: map[string]bool{"kv_bf16": false, "one_plus": true}},
	ir.AttentionDecodeMMAQK: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 16, "capacity": 6, "width": 16, "splits": 3, "split_align": 1, "block_heads": 2, "warps": 2, "ring_stages": 1, "rot_dim": 4, "new_rows": 3},
		Reals: map[string]float64{"scale": 0.35, "eps": 1e-6, "theta": 1e4}, Flags: map[string]bool{"kv_bf16": true, "one_plus": true}},
	ir.QKNormRoPEAppend: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 8, "rot_dim": 4, "capacity": 6, "width": 8},
		Reals: map[string]float64{"eps": 1e-6, "theta": 1e4}, Flags: map[string]bool{"one_plus": true, "kv_bf16": false}},
	ir.AttentionPrefill: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 16, "capacity": 6, "width": 16, "block_m": 16, "block_n": 16},
		Reals: map[string]float64{"scale": 0.25}, Flags: map[string]bool{"kv_bf16": false, "split_q": true, "split_kv": true, "split_p": true}},
	ir.AttentionPrefillWG: {Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 64, "capacity": 6, "width": 64, "block_m": 64, "block_n": 16, "k_stages": 1, "v_stages": 1},
		Reals: map[string]float64{"scale": 0.125}, Flags: map[string]bool{"kv_bf16": true, "split_q": true, "split_kv": false, "split_p": true, "fp16": false}},
	ir.AttnOutputGate:      {Ints: map[string]int64{"heads": 2, "head_dim": 4}},
	ir.RouterTopK:          {Ints: map[string]int64{"experts": 4, "k": 2}},
	ir.MoEGateUp:           {Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2}},
	ir.MoEDown:             {Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2}},
	ir.SiLUMul:             {Ints: map[string]int64{"width": 8}},
	ir.Add:                 {Ints: map[string]int64{"width": 8}},
	ir.SharedExpertCombine: {Ints: map[string]int64{"hidden": 8}},
	ir.FillUniform:         {Flags: map[string]bool{"bf16": true}},
	ir.Sample:              {Ints: map[string]int64{"vocab": 9, "rows": 1}},
	ir.QuantizeRowsInt8:    {Ints: map[string]int64{"k": 8, "n": 5}},
	ir.LMHeadInt8:          {Ints: map[string]int64{"k": 8, "n": 5, "group": 8, "rows_per_warp": 1, "unroll": 1}},
	ir.LMHeadCertify:       {Ints: map[string]int64{"k": 8, "n": 5, "group": 8, "blocks": 2, "cap": 4, "split_k": 1, "unroll": 1}},
	ir.LMHeadPick:          {Ints: map[string]int64{"blocks": 2}},
	ir.RMSNormLMHeadInt8: {Ints: map[string]int64{"k": 8, "n": 5, "group": 8, "rows_per_warp": 1, "unroll": 1},
		Reals: map[string]float64{"eps": 1e-6}, Flags: map[string]bool{"one_plus": true}},
	ir.RMSNormLMHeadCertify: {Ints: map[string]int64{"k": 8, "n": 5, "group": 8, "blocks": 2, "cap": 4, "split_k": 1, "unroll": 1},
		Reals: map[string]float64{"eps": 1e-6}, Flags: map[string]bool{"one_plus": true}},
}

// TestFamiliesComplete fails when a family lacks any part of its
// declaration: operands with extents, parameters, a reference, a template
// file, a launch rule that gives every GPU target a shape within its
// launch configuration, slots that are named slots.
func TestFamiliesComplete(t *testing.T) {
	tmpls, err := fs.Glob(kernels.Templates, "*.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	for kind, f := range kernels.Families {
		if f.Kind != kind {
			t.Errorf("%s: declared under kind %s", f.Kind, kind)
		}
		if len(f.Operands) == 0 {
			t.Errorf("%s: no operands", kind)
		}
		for _, o := range f.Operands {
			if o.Name == "" || o.Extent == nil || (o.DType.Size() == 0 && o.DType != ir.AnyFloat) || o.Access == "" {
				t.Errorf("%s: operand %+v is incomplete", kind, o)
			}
			if o.DType == ir.AnyFloat && f.AnyFloatFlag == "" {
				t.Errorf("%s: operand %s is AnyFloat without a dtype flag", kind, o.Name)
			}
		}
		if f.AnyFloatFlag != "" && !slices.Contains(f.Params, ir.ParamSpec{Name: f.AnyFloatFlag, Kind: ir.FlagParam}) {
			t.Errorf("%s: dtype flag %s is not a declared flag", kind, f.AnyFloatFlag)
		}
		for _, s := range f.Slots {
			if !s.Valid() {
				t.Errorf("%s: slot %d is not a named slot", kind, int(s))
			}
		}
		if f.Reference == nil {
			t.Errorf("%s: no reference", kind)
		}
		if !slices.Contains(tmpls, f.Template) {
			t.Errorf("%s: template %q is not in kernels/*.tmpl", kind, f.Template)
		}
		p, ok := examples[kind]
		if !ok {
			t.Errorf("%s: no example parameters in this test", kind)
			continue
		}
		if err := f.CheckParams(p); err != nil {
			t.Errorf("%s: example: %v", kind, err)
			continue
		}
		if f.Launch == nil {
			t.Errorf("%s: no launch rule", kind)
			continue
		}
		for _, target := range plan.GPUTargets() {
			c := target.Launch()
			for _, rows := range []int{1, 3, 1000} {
				s := f.Launch(p, rows, c)
				threads := s.Block[0] * s.Block[1] * s.Block[2]
				if min(s.Grid[0], s.Grid[1], s.Grid[2], s.Block[0], s.Block[1], s.Block[2]) < 1 || threads > c.Threads || s.SharedBytes > c.MaxSharedBytes || s.SharedBytes < 0 {
					t.Errorf("%s on %s, %d rows: launch %+v outside %+v", kind, target, rows, s, c)
				}
			}
		}
	}
	for _, name := range tmpls {
		if slices.Contains(kernels.Helpers, name) {
			continue
		}
		if _, ok := kernels.Families[ir.Kind(strings.TrimSuffix(name, ".tmpl"))]; !ok {
			t.Errorf("template %s belongs to no family", name)
		}
	}
}

// bind allocates every operand of f for rows rows (8-byte aligned, filled
// with small values) and returns the reference's arguments.
func bind(f *ir.Family, p ir.Params, rows int, block *[ir.ParamSlots]int32) *ir.Args {
	a := &ir.Args{Family: f, Params: p, N: rows, Block: block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		size := int64(o.DType.Size())
		if o.DType == ir.AnyFloat {
			size = 4
			if f.AnyFloatIsBF16(p) {
				size = 2
			}
		}
		n := o.Extent(p, int64(rows)) * size
		words := make([]uint64, (n+7)/8)
		a.Mem[i] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
	}
	for i, o := range f.Operands {
		switch {
		case o.Name == "arrivals": // arrival counters are zero between launches
		case o.DType == ir.I32 && o.Name == "slots":
			for j := range a.I32(o.Name) {
				a.I32(o.Name)[j] = 5 // gdn_decode_peer's: tags equal within a key head, as every launch leaves them
			}
		case o.DType == ir.I32:
			for j := range a.I32(o.Name) {
				a.I32(o.Name)[j] = int32(j % 2)
			}
		case o.DType == ir.BF16:
			v := a.BF16(o.Name)
			for j := range v {
				v[j] = bf16.FromFloat32(float32(math.Cos(float64(i*17+j))) * 0.1)
			}
		case o.DType == ir.F32 || (o.DType == ir.AnyFloat && !f.AnyFloatIsBF16(p)):
			v := a.F32(o.Name)
			for j := range v {
				v[j] = float32(math.Sin(float64(i*31 + j)))
			}
		}
	}
	return a
}

// TestReferencesRun runs every family's reference on its example through
// named operands: every name it reads is declared, and it writes only
// finite values.
func TestReferencesRun(t *testing.T) {
	for kind, f := range kernels.Families {
		p, ok := examples[kind]
		if !ok {
			continue // TestFamiliesComplete reports it
		}
		rows := 3
		if r, ok := p.Rows(); ok {
			rows = int(r)
		}
		var block [ir.ParamSlots]int32
		block[ir.ParamPos] = 1
		block[ir.ParamFillScale] = int32(math.Float32bits(1))
		a := bind(f, p, rows, &block)
		if err := a.Check(); err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		err := f.Reference(a)
		if kind == ir.DecodePersistent {
			// Its launches run one by one where it does not: no reference of its own.
			if err == nil {
				t.Errorf("%s: its reference ran", kind)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		for _, o := range f.Operands {
			if o.Access == ir.Read || o.DType != ir.F32 {
				continue
			}
			for j, v := range a.F32(o.Name) {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Errorf("%s: %s[%d] = %v", kind, o.Name, j, v)
					break
				}
			}
		}
	}
}

// TestArgsCheck refuses memory shorter than an operand's extent.
func TestArgsCheck(t *testing.T) {
	f := kernels.Families[ir.Add]
	var block [ir.ParamSlots]int32
	a := bind(f, examples[ir.Add], 3, &block)
	a.Mem[1] = a.Mem[1][:8]
	if err := a.Check(); err == nil || !strings.Contains(err.Error(), "operand y: 8 bytes, 3 rows need 96") {
		t.Errorf("error %v", err)
	}
}

// TestMatMulAddComposed holds the fused family's reference to its oracle:
// matmul into a scratch row then add, bit for bit.
func TestMatMulAddComposed(t *testing.T) {
	p := ir.Params{Ints: map[string]int64{"k": 24, "n": 5}}
	var block [ir.ParamSlots]int32
	fused := bind(kernels.Families[ir.MatMulAdd], p, 3, &block)
	if err := kernels.Families[ir.MatMulAdd].Reference(fused); err != nil {
		t.Fatal(err)
	}
	un := bind(kernels.Families[ir.MatMulAdd], p, 3, &block)
	sum := make([]float32, 3*5)
	kernels.MatMul(sum, un.F32("x"), un.BF16("w"), 3, 24, 5)
	kernels.Add(un.F32("y"), sum, 15)
	for i, v := range fused.F32("y") {
		if math.Float32bits(v) != math.Float32bits(un.F32("y")[i]) {
			t.Fatalf("y[%d] = %v, matmul then add gives %v", i, v, un.F32("y")[i])
		}
	}
}
