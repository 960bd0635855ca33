package codegen

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// moeRoute is a moe_decode_route_gate_up case kernel: moe_decode_gate_up's
// parameters, the router's norm (1 + w unless plain) and the grid's blocks.
func moeRoute(experts, hidden, inter, k, shared, rpw, unroll, blocks float64, plain bool) plan.Kernel {
	onePlus := 1.0
	if plain {
		onePlus = 0
	}
	return kern("moe_decode_route_gate_up", map[string]float64{"experts": experts, "hidden": hidden, "inter": inter, "k": k,
		"shared_inter": shared, "rows_per_warp": rpw, "unroll": unroll, "blocks": blocks, "eps": 1e-6, "one_plus": onePlus})
}

// moeRouteCases are moe_decode_route_gate_up's correctness cases: the real
// router (256 experts, top-8) over small experts; the tiny fixtures'
// shapes (testdata/hf-tiny: 16 experts, top-4, inter 32, hidden 64;
// synth's tiny preset: 8 experts, top-2) with one block per routed row
// group, as the stream pass gives them; odd widths (hidden 20: the
// one-element path); top-1 on one block (the barrier of a grid of one);
// several routed row groups a block (blocks below the groups); the real
// hidden and inter with the sm_90 grid (256 blocks: a router row and two
// shared rows a block) and gfx1151's (40 blocks: 7 router and 13 shared
// rows a block); hidden 4096 (two chunks a thread); a plain-w norm; two
// rows. Every output is poisoned (ids −5, floats 7) and the barrier count
// starts at 2³¹, which the launch must leave at 0.
var moeRouteCases = []gpuCase{
	{"moe_route_router", moeRoute(256, 64, 16, 8, 24, 1, 1, 32, false), 1, 0},
	{"moe_route_tiny", moeRoute(16, 64, 32, 4, 32, 1, 1, 16, false), 1, 0},
	{"moe_route_synth", moeRoute(8, 64, 32, 2, 32, 1, 1, 8, false), 1, 0},
	{"moe_route_odd", moeRoute(5, 20, 6, 3, 10, 2, 1, 3, false), 1, 0},
	{"moe_route_k1", moeRoute(7, 16, 5, 1, 3, 1, 1, 1, false), 1, 0},
	{"moe_route_stride", moeRoute(64, 2048, 72, 8, 40, 2, 4, 13, false), 1, 0},
	{"moe_route_real", moeRoute(12, 2048, 512, 8, 512, 2, 4, 256, false), 1, 0},
	{"moe_route_real_gfx", moeRoute(12, 2048, 512, 8, 512, 2, 4, 40, false), 1, 0},
	{"moe_route_wide", moeRoute(32, 4096, 64, 4, 32, 1, 2, 16, false), 1, 0},
	{"moe_route_plain", moeRoute(16, 64, 32, 4, 32, 1, 1, 16, true), 1, 0},
	{"moe_route_rows2", moeRoute(40, 264, 24, 8, 8, 2, 4, 20, false), 2, 0},
}

// TestWriteGPUCasesMoERoute writes moe_decode_route_gate_up's correctness
// cases.
func TestWriteGPUCasesMoERoute(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range moeRouteCases {
		dir := filepath.Join(out, c.name)
		writeCase(t, dir, c, uint64(500+i))
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 4 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// TestCompileMoERouteCases compiles every correctness case's kernel for
// gfx1151 (no scratch) and to PTX.
func TestCompileMoERouteCases(t *testing.T) { compileCases(t, moeRouteCases) }

// TestWriteGPUCasesMoERouteSpeed writes the speed cases of the fused
// router at the real sizes (256 experts of 512 × 2048, a shared expert of
// 512, top-8, the 256 × 2048 router) with the planner's sm_90 parameters,
// beside the two launches it replaces on the same bytes (the router's
// rmsnorm_gemv and moe_decode_gate_up): one token, its router rows tilted
// towards experts 0–7 (the stored part of the expert tensor), each timed
// launch on one of 8 copies of every operand, so that the 8 × 38.8 MB a
// rotation reads (310 MB) come from HBM as in the decode step. Without
// -gpucases the same cases are written at a sixteenth of the experts.
func TestWriteGPUCasesMoERouteSpeed(t *testing.T) {
	out, E := *gpuCases, 256.0
	if out == "" {
		out, E = t.TempDir(), 16
	}
	const H, I, S, top, rotate = 2048, 512, 512, 8, 8
	experts := int64(top * 2 * I * H)
	shared := int64(2 * S * H * 2)
	router := int64(E) * H * 2
	fused := router + experts*2 + shared + H*4*2 + int64(E)*4 + (top*I+S)*4 + H*4 + top*8
	gateUp := experts*2 + shared + H*4 + int64(E)*4 + (top*I+S)*4 + top*8
	norm := router + H*4*3 + int64(E)*4
	// tilt routes the token to experts 0–7: their router rows follow the
	// sign of x·(1 + w), so their logits lead the others' by far.
	tilt := func(a *ir.Args) {
		x, w, r := a.F32("x"), a.F32("norm_w"), a.BF16("router")
		for j := range top {
			for c := range H {
				r[j*H+c] = bf16.FromFloat32(float32(math.Copysign(0.05, float64(x[c]*(1+w[c])))))
			}
		}
	}
	favour := func(a *ir.Args) {
		logits := a.F32("logits")
		for j := range top {
			logits[j] += 8
		}
	}
	note := "one token, each launch on one of 8 copies of its operands (8 × its bytes: past the 50 MB L2, from HBM)"
	cases := []struct {
		c    streamCase
		prep func(*ir.Args)
	}{
		{streamCase{"speed_moe_route_gu", moeRoute(E, H, I, top, S, 2, 4, 256, false), fused, "",
			note + "; router + norm + top-8 + gate_up·SiLU in one launch (256 blocks)", map[string]int64{"gate_up": experts}}, tilt},
		{streamCase{"speed_moe_route_gu_b132", moeRoute(E, H, I, top, S, 2, 4, 132, false), fused, "speed_moe_route_gu",
			note + "; 132 blocks (one an SM, two routed row groups each)", map[string]int64{"gate_up": experts}}, tilt},
		{streamCase{"speed_moe_dec_gu_rot", moeDecode("moe_decode_gate_up", E, H, I, top, S, 2, 4), gateUp, "",
			note + "; moe_decode_gate_up alone (the launch the fused one replaces, with the router's)", map[string]int64{"gate_up": experts}}, favour},
		{streamCase{"speed_norm_gemv_router_rot", normGEMV(H, E, 1, 8, 1, true), norm, "", note + "; the router's rmsnorm_gemv alone", nil}, nil},
	}
	for i, c := range cases {
		dir := filepath.Join(out, c.c.name)
		writeStreamCaseRows(t, dir, c.c, uint64(600+i), 1, c.prep)
		rotateCase(t, dir, rotate)
	}
}

// rotateCase sets a written speed case's rotation: its timed launches take
// copy i mod copies of every operand.
func rotateCase(t *testing.T, dir string, copies int) {
	path := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["rotate"] = copies
	b, _ = json.MarshalIndent(m, "", " ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
