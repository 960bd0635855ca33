package codegen

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// gdnStepParams are a GDN decode step's parameters for key and value
// heads hk, hv of dims dk, dv (conv width 4, the model's scales); tile > 0
// adds gdn_decode_split's column tile.
func gdnStepParams(hk, hv, dk, dv, tile float64) map[string]float64 {
	p := map[string]float64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": 4,
		"l2_eps": 1e-6, "q_scale": 1 / math.Sqrt(dk), "k_scale": 1, "eps": 1e-6}
	if tile > 0 {
		p["col_tile"] = tile
	}
	return p
}

// gdnSplit is a gdn_decode_split case kernel, named for its shape so that
// compiled variants do not share a name.
func gdnSplit(hk, hv, dk, dv, tile float64) plan.Kernel {
	k := kern("gdn_decode_split", gdnStepParams(hk, hv, dk, dv, tile))
	k.Name = fmt.Sprintf("gdn_decode_split_%g_%g_%g_%g_t%g", hk, hv, dk, dv, tile)
	return k
}

// gdnPeer is a gdn_decode_peer case kernel, named for its shape.
func gdnPeer(hk, hv, dk, dv, tile float64) plan.Kernel {
	k := kern("gdn_decode_peer", gdnStepParams(hk, hv, dk, dv, tile))
	k.Name = fmt.Sprintf("gdn_decode_peer_%g_%g_%g_%g_t%g", hk, hv, dk, dv, tile)
	return k
}

// gdnPeerConv is gdnPeer with conv width kw (scalar conv weights).
func gdnPeerConv(hk, hv, dk, dv, tile, kw float64) plan.Kernel {
	k := gdnPeer(hk, hv, dk, dv, tile)
	k.Params.SetInt("kernel", int64(kw))
	k.Name += fmt.Sprintf("_k%g", kw)
	return k
}

// gdnPeerCases are the correctness cases of gdn_decode_peer: the model's
// shape at the tile the planner picks on the H200 (32 columns, 128
// blocks) and on gfx1151 (128, a block per value head), the tiles beside
// them, one row and several; the tiny fixtures' shape (hf-tiny's, synth
// tiny's) at 16-byte and scalar tiles, the planner's among them (1 on the
// H200: 32 blocks a key head, a lane each; 2 on gfx1151); odd dims (scalar
// loads, idle threads, groups of three, five and nine blocks); a conv
// width of 3 (scalar weights). Every written operand is
// compared: y (rows past n poisoned), both states and the slots, whose
// tags start equal within a key head and parity at any value (the first
// key head's parity 0 at the int32 wrap) and must come back raised by the
// rows of that parity, beside the rows' Σo² (within tolerance).
var gdnPeerCases = []gpuCase{
	{"gdn_peer_t32", gdnPeer(16, 32, 128, 128, 32), 1, 0},
	{"gdn_peer_t16", gdnPeer(16, 32, 128, 128, 16), 1, 0},
	{"gdn_peer_t64", gdnPeer(16, 32, 128, 128, 64), 1, 0},
	{"gdn_peer_t128", gdnPeer(16, 32, 128, 128, 128), 1, 0},
	{"gdn_peer_rows", gdnPeer(16, 32, 128, 128, 32), 3, 0},
	{"gdn_peer_rows_t128", gdnPeer(16, 32, 128, 128, 128), 2, 0},
	{"gdn_peer_tiny_t16", gdnPeer(2, 4, 16, 16, 16), 1, 0},
	{"gdn_peer_tiny_t4", gdnPeer(2, 4, 16, 16, 4), 1, 0},
	{"gdn_peer_tiny_t1", gdnPeer(2, 4, 16, 16, 1), 1, 0},
	{"gdn_peer_tiny_t2", gdnPeer(2, 4, 16, 16, 2), 2, 0},
	{"gdn_peer_tiny_rows", gdnPeer(2, 4, 16, 16, 4), 3, 0},
	{"gdn_peer_odd_t2", gdnPeer(2, 4, 12, 10, 2), 1, 0},
	{"gdn_peer_odd_t1", gdnPeer(1, 3, 20, 9, 1), 2, 0},
	{"gdn_peer_odd_t8", gdnPeer(1, 3, 20, 24, 8), 1, 0},
	{"gdn_peer_conv3", gdnPeerConv(2, 4, 16, 16, 4, 3), 2, 0},
}

// gdnSplitCases are the correctness cases of gdn_decode_split: the
// model's shape (16 key heads, 32 value heads, dims 128) at the column
// tiles the planner may pick, one row (decode) and several; the tiny
// fixtures' (2 key heads, 4 value heads, dims 16) at 16-byte and scalar
// tiles; odd dims (scalar loads, idle threads, a group of three); every
// written operand compared: y, the partial sums, both states and the
// arrival counters, which must be back at zero.
var gdnSplitCases = []gpuCase{
	{"gdn_split_t16", gdnSplit(16, 32, 128, 128, 16), 1, 0},
	{"gdn_split_t32", gdnSplit(16, 32, 128, 128, 32), 1, 0},
	{"gdn_split_t8", gdnSplit(16, 32, 128, 128, 8), 1, 0},
	{"gdn_split_t4", gdnSplit(16, 32, 128, 128, 4), 1, 0},
	{"gdn_split_rows", gdnSplit(16, 32, 128, 128, 16), 2, 0},
	{"gdn_split_tiny_t16", gdnSplit(2, 4, 16, 16, 16), 1, 0},
	{"gdn_split_tiny_t4", gdnSplit(2, 4, 16, 16, 4), 1, 0},
	{"gdn_split_tiny_t1", gdnSplit(2, 4, 16, 16, 1), 1, 0},
	{"gdn_split_tiny_rows", gdnSplit(2, 4, 16, 16, 4), 3, 0},
	{"gdn_split_odd_t2", gdnSplit(2, 4, 12, 10, 2), 1, 0},
	{"gdn_split_odd_t1", gdnSplit(1, 3, 20, 9, 1), 2, 0},
	{"gdn_split_odd_t8", gdnSplit(1, 3, 20, 24, 8), 1, 0},
}

// gdnOut is a gdn_decode_out case kernel (gdn_decode_split's shape, the
// output projection's hidden width, its slice staged in shared memory or
// not), named for its shape.
func gdnOut(hk, hv, dk, dv, tile, hidden float64, stage bool) plan.Kernel {
	p := gdnStepParams(hk, hv, dk, dv, tile)
	p["hidden"] = hidden
	p["stage"] = 0
	if stage {
		p["stage"] = 1
	}
	k := kern("gdn_decode_out", p)
	k.Name = fmt.Sprintf("gdn_decode_out_%g_%g_%g_%g_t%g_h%g_s%v", hk, hv, dk, dv, tile, hidden, stage)
	return k
}

// gdnOutCases are the correctness cases of gdn_decode_out: the model's
// GDN shape with the plan's tile (a hidden width of 256: the projection's
// slice is the model's 2048 rows' code path on an eighth of the bytes),
// staged and not, two rows; a narrower tile
// (256 blocks, three an SM); the tiny fixtures' shape; odd widths (a tile
// of 8 columns with a hidden width that leaves the last block a short
// share, one column a tile on the one-element path); the barrier and the
// split's arrival counters start at zero, every output is poisoned.
var gdnOutCases = []gpuCase{
	{"gdn_out_t32", gdnOut(16, 32, 128, 128, 32, 256, true), 1, 0},
	{"gdn_out_t32_global", gdnOut(16, 32, 128, 128, 32, 256, false), 1, 0},
	{"gdn_out_t32_rows", gdnOut(16, 32, 128, 128, 32, 256, true), 2, 0},
	{"gdn_out_t16", gdnOut(16, 32, 128, 128, 16, 256, true), 1, 0},
	{"gdn_out_tiny", gdnOut(2, 4, 16, 16, 4, 64, false), 1, 0},
	{"gdn_out_tiny_rows", gdnOut(2, 4, 16, 16, 4, 64, false), 3, 0},
	{"gdn_out_odd_t8", gdnOut(1, 3, 20, 24, 8, 37, true), 1, 0},
	{"gdn_out_odd_t1", gdnOut(1, 3, 20, 9, 1, 10, false), 2, 0},
	{"gdn_out_t32_bulk", gdnOutBulk(16, 32, 128, 128, 32, 256), 2, 0},
	{"gdn_out_odd_t8_bulk", gdnOutBulk(1, 3, 20, 24, 8, 37), 1, 0},
	{"gdn_out_t32_mid", gdnOutFlag(16, 32, 128, 128, 32, 256, "stage_mid"), 2, 0},
	{"gdn_out_odd_t8_mid", gdnOutFlag(1, 3, 20, 24, 8, 37, "stage_mid"), 1, 0},
}

// gdnOutFlag is gdnOut staged, with flag (a stage mode) set.
func gdnOutFlag(hk, hv, dk, dv, tile, hidden float64, flag string) plan.Kernel {
	k := gdnOut(hk, hv, dk, dv, tile, hidden, true)
	k.Params.SetFlag(flag, true)
	k.Name += "_" + flag
	return k
}

// gdnOutBulk is gdnOut staged with bulk copies on an mbarrier (stage_bulk).
func gdnOutBulk(hk, hv, dk, dv, tile, hidden float64) plan.Kernel {
	return gdnOutFlag(hk, hv, dk, dv, tile, hidden, "stage_bulk")
}

// gdnBytes is what one launch of kernel k over one row must move: every
// operand's extent, read-write ones both ways.
func gdnBytes(k plan.Kernel) int64 {
	var b int64
	for _, o := range kernels.Families[ir.Kind(k.Family)].Operands {
		n := o.Extent(k.Params, 1) * int64(o.DType.Size())
		if o.Access == ir.ReadWrite {
			n *= 2
		}
		b += n
	}
	return b
}

// TestWriteGPUCasesGDNSplit writes gdn_decode_split's correctness cases
// and its speed cases at the model's size: one decode row, the launch
// timed over 128 copies of every operand (≈ 300 MB, past the 50 MB L2, as
// each of the 30 layers' state is when its turn comes in a step), at three
// column tiles, with gdn_decode_step timed on the same files. The GPU check
// holds them to its f32 tolerance (2e-4 + 1e-3·|want|): the partial sums
// and the column dot products add in other orders than the chain's
// references.
func TestWriteGPUCasesGDNSplit(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range gdnSplitCases {
		writeCase(t, filepath.Join(out, c.name), c, uint64(3000+i))
	}
	for i, c := range gdnPeerCases {
		writeCase(t, filepath.Join(out, c.name), c, uint64(3200+i))
	}
	for i, c := range gdnOutCases {
		writeCase(t, filepath.Join(out, c.name), c, uint64(3400+i))
	}
	const rotate = 128
	hbm := fmt.Sprintf("one decode row, %d copies of every operand rotated (%.0f MB, past the L2)", rotate,
		float64(rotate*gdnBytes(gdnSplit(16, 32, 128, 128, 16)))/2e6)
	step := kern("gdn_decode_step", gdnStepParams(16, 32, 128, 128, 0))
	speed := []struct {
		c    gpuCase
		from string
	}{
		{gpuCase{"speed_gdn_split_t16", gdnSplit(16, 32, 128, 128, 16), 1, 0}, ""},
		{gpuCase{"speed_gdn_split_t32", gdnSplit(16, 32, 128, 128, 32), 1, 0}, ""},
		{gpuCase{"speed_gdn_split_t8", gdnSplit(16, 32, 128, 128, 8), 1, 0}, ""},
		{gpuCase{"speed_gdn_split_t4", gdnSplit(16, 32, 128, 128, 4), 1, 0}, ""},
		{gpuCase{"speed_gdn_step", step, 1, 0}, "speed_gdn_split_t32"},
		{gpuCase{"speed_gdn_peer_t32", gdnPeer(16, 32, 128, 128, 32), 1, 0}, ""},
		{gpuCase{"speed_gdn_peer_t16", gdnPeer(16, 32, 128, 128, 16), 1, 0}, ""},
		{gpuCase{"speed_gdn_peer_t64", gdnPeer(16, 32, 128, 128, 64), 1, 0}, ""},
		{gpuCase{"speed_gdn_peer_t128", gdnPeer(16, 32, 128, 128, 128), 1, 0}, ""},
	}
	for i, s := range speed {
		// The plan's tiles of both families and the old step are also timed
		// inside a graph (no host floor, with and without PDL).
		graph := s.c.name == "speed_gdn_split_t32" || s.c.name == "speed_gdn_step" || strings.HasPrefix(s.c.name, "speed_gdn_peer")
		sp := &caseSpeed{reps: 256, rotate: rotate, bytes: gdnBytes(s.c.k), from: s.from, note: hbm, graph: graph}
		if s.from != "" {
			sp.note += " (the family gdn_decode_split replaces, on its files)"
		}
		writeTimedCase(t, filepath.Join(out, s.c.name), s.c, uint64(3100+i), sp)
	}
	// The plan's tile on one copy, its working set in L2: against the
	// rotated case, how much of the launch is latency rather than HBM.
	l2 := gpuCase{"speed_gdn_split_t32_l2", gdnSplit(16, 32, 128, 128, 32), 1, 0}
	writeTimedCase(t, filepath.Join(out, l2.name), l2, 0, &caseSpeed{reps: 256, rotate: 1, bytes: gdnBytes(l2.k),
		from: "speed_gdn_split_t32", note: "one copy of every operand: the 4.6 MB working set stays in L2", graph: true})
	// The tiny fixtures' step (hf-tiny's on the H200: 64 blocks, 32 a key
	// head): next to nothing to move, so its time is the launch, the one
	// load wave and the exchange: the family's floor.
	tiny := gpuCase{"speed_gdn_peer_tiny", gdnPeer(2, 4, 16, 16, 1), 1, 0}
	writeTimedCase(t, filepath.Join(out, tiny.name), tiny, 3300, &caseSpeed{reps: 256, rotate: 1, bytes: gdnBytes(tiny.k),
		note: "the tiny fixtures' shape: the launch, one load wave and the exchange, next to no bytes", graph: true})
	// gdn_decode_out at the plan's shape: the split's bytes and the output
	// projection's 16.8 MB, against speed_gdn_split_t32 plus a gemv_add of
	// 2048 × 4096 (speed_gemv_add_*).
	o := gpuCase{"speed_gdn_out_t32", gdnOut(16, 32, 128, 128, 32, 2048, true), 1, 0}
	writeTimedCase(t, filepath.Join(out, o.name), o, 3450, &caseSpeed{reps: 256, rotate: 32, bytes: gdnBytes(o.k),
		note: "one decode row, 32 copies of every operand rotated (past the L2)", graph: true})
	l2p := gpuCase{"speed_gdn_peer_t32_l2", gdnPeer(16, 32, 128, 128, 32), 1, 0}
	writeTimedCase(t, filepath.Join(out, l2p.name), l2p, 0, &caseSpeed{reps: 256, rotate: 1, bytes: gdnBytes(l2p.k),
		from: "speed_gdn_peer_t32", note: "one copy of every operand: the 4.6 MB working set stays in L2", graph: true})

}

// TestCompileGDNDecodeSplit compiles gdn_decode_split, gdn_decode_peer and
// gdn_decode_out at every case's shape, and gdn_decode_step at the model's, for gfx1151 (no scratch,
// within the VGPR and LDS budgets) and to PTX for sm_90: the frozen plans
// hold only the model's tile of the one and none of the other.
func TestCompileGDNDecodeSplit(t *testing.T) {
	c := clang(t)
	for _, target := range []plan.Target{plan.GFX1151, plan.SM90} {
		var srcs []hipcc.Source
		seen := map[string]bool{}
		// gdn_decode_step, the oracle no frozen GPU plan holds any more.
		old := kern("gdn_decode_step", gdnStepParams(16, 32, 128, 128, 0))
		old.Name = "gdn_decode_step_16_32_128_128"
		for _, gc := range append(append(append([]gpuCase{{"step", old, 1, 0}}, gdnSplitCases...), gdnPeerCases...), gdnOutCases...) {
			if seen[gc.k.Name] {
				continue
			}
			seen[gc.k.Name] = true
			s, err := Render(target, gc.k)
			if err != nil {
				t.Fatalf("%s: %v", gc.name, err)
			}
			srcs = append(srcs, hipcc.Source{Name: gc.k.Name, Code: s.Code})
		}
		var results []hipcc.Result
		var err error
		if target == plan.SM90 {
			results, err = c.SyntaxCheckCUDA(context.Background(), srcs, hipcc.Options{})
		} else {
			results, err = c.Compile(context.Background(), hipcc.GFX1151, srcs, hipcc.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Object == nil || strings.Contains(r.Log, "warning") {
				t.Errorf("%s %s: %s", target, r.Name, r.Log)
				continue
			}
			if target == plan.SM90 {
				continue
			}
			res := r.Resources
			if why := res.Spills(); why != "" || res.ScratchBytes != 0 || res.VGPRs > maxVGPRs || res.LDSBytes > maxLDS {
				t.Errorf("%s: scratch %q (%d bytes), %d VGPRs, LDS %d", r.Name, why, res.ScratchBytes, res.VGPRs, res.LDSBytes)
			}
			t.Logf("%s: %d VGPRs, %d LDS bytes", r.Name, res.VGPRs, res.LDSBytes)
		}
	}
}
