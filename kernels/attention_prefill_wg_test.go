package kernels

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
)

// wgParams are attention_prefill_wg parameters at the real model's heads
// (16 query, 2 KV, 256 dims) over a bf16 cache.
func wgParams(d, bm, bn, vStages int, split bool) ir.Params {
	var p ir.Params
	for name, v := range map[string]int{"q_heads": 16, "kv_heads": 2, "head_dim": d, "capacity": 8192, "width": 2 * d, "block_m": bm, "block_n": bn, "k_stages": 1, "v_stages": vStages} {
		p.SetInt(name, int64(v))
	}
	p.SetReal("scale", 0.0625)
	p.SetFlag("kv_bf16", true)
	p.SetFlag("split_kv", false)
	p.SetFlag("split_q", split)
	p.SetFlag("split_p", split)
	p.SetFlag("fp16", false)
	return p
}

// TestWGTileOffset checks the tile layout against wgmma's 128-byte swizzle
// as the hardware defines it on addresses: within each 1024-byte atom,
// byte address bits 4–6 XORed with bits 7–9, the unswizzled layout being
// column blocks of 64 dims, each rows × 128 bytes. Every (row, col) lands
// on a distinct element, and the 8 rows that one 16-byte chunk column
// spans hit 8 distinct 16-byte bank groups.
func TestWGTileOffset(t *testing.T) {
	for _, tc := range []struct{ rows, cols int }{{64, 256}, {128, 64}, {16, 128}, {32, 192}} {
		seen := map[int]bool{}
		for row := range tc.rows {
			for col := range tc.cols {
				plainBytes := ((col/64)*tc.rows+row)*128 + (col%64)*2
				swizzled := plainBytes ^ ((plainBytes >> 7 & 7) << 4)
				got := WGTileOffset(tc.rows, row, col)
				if got*2 != swizzled {
					t.Fatalf("%d×%d: (%d, %d) at element %d, want byte %d", tc.rows, tc.cols, row, col, got, swizzled)
				}
				if seen[got] {
					t.Fatalf("%d×%d: (%d, %d) shares element %d", tc.rows, tc.cols, row, col, got)
				}
				seen[got] = true
			}
		}
		for r0 := 0; r0 < tc.rows; r0 += 8 {
			for col := 0; col < tc.cols; col += 8 {
				groups := map[int]bool{}
				for r := r0; r < r0+8; r++ {
					groups[WGTileOffset(tc.rows, r, col)*2/16%8] = true
				}
				if len(groups) != 8 {
					t.Fatalf("%d×%d: rows %d.. at col %d hit %d bank groups", tc.rows, tc.cols, r0, col, len(groups))
				}
			}
		}
	}
}

// TestWGFigures pins the shared memory and K and V buffers of the
// planner's tiles: at head_dim 256 with q split (Q and its lo terms, 128
// KiB) and 64 positions two V buffers and one K buffer fit in sm_90's 227
// KiB (225 KiB with the 1 KiB of alignment slack); plain (or fp16) operands
// take two of each (193 KiB); with 128 positions one of each (and only for
// 64 rows).
func TestWGFigures(t *testing.T) {
	const max = 232448
	type figures struct{ KStages, VStages, Shared int }
	for _, tc := range []struct {
		name string
		p    ir.Params
		want figures
	}{
		{"split 128x64", wgParams(256, 128, 64, 2, true), figures{1, 2, 230400}},
		{"plain 128x64", wgParams(256, 128, 64, 2, false), figures{2, 2, 197632}},
		{"split 128x32", wgParams(256, 128, 32, 2, true), figures{2, 2, 197632}},
		{"split 64x128", wgParams(256, 64, 128, 1, true), figures{1, 1, 197632}},
		{"split 128x128", wgParams(256, 128, 128, 1, true), figures{1, 1, 263168}},
	} {
		k, v := WGStages(tc.p, max)
		tc.p.SetInt("k_stages", int64(k))
		tc.p.SetInt("v_stages", int64(v))
		got := figures{k, v, WGSharedBytes(tc.p)}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestWGSpeedShapes: the shapes of the speed cases and of the plans (an
// 8K segment at the end of a 256K-position cache, the real model's heads)
// pass the family's check, and the kernel's 32-bit quantities stay in
// range there: packed rows (8K tokens × 8 heads), positions (the cache and
// the two tiles a prefetch may run past it); element offsets (position ×
// width, row × head_dim) are 64-bit in the kernel.
func TestWGSpeedShapes(t *testing.T) {
	const n, capacity = 8192, 262144
	f := Families[ir.AttentionPrefillWG]
	for _, bn := range []int{32, 48, 64, 80, 96, 128} {
		p := wgParams(256, 128, bn, 1, true)
		p.SetInt("capacity", capacity)
		if bn > 64 {
			p.SetFlag("split_q", false)
			p.SetFlag("split_p", false)
		}
		if err := f.CheckParams(p); err != nil {
			t.Errorf("block_n %d: %v", bn, err)
		}
		group := p.Int("q_heads") / p.Int("kv_heads")
		if rows := int64(n) * int64(group); rows >= 1<<31 {
			t.Errorf("%d packed rows", rows)
		}
		if last := int64(capacity) + 2*int64(bn); last >= 1<<31 {
			t.Errorf("position %d", last)
		}
	}
}

// TestWGCheck: the family refuses what its kernel cannot serve, naming it.
func TestWGCheck(t *testing.T) {
	f := Families[ir.AttentionPrefillWG]
	if err := f.CheckParams(wgParams(256, 128, 64, 2, true)); err != nil {
		t.Fatalf("the planner's tile: %v", err)
	}
	f32 := wgParams(256, 128, 64, 2, true)
	f32.SetFlag("kv_bf16", false)
	fp16Split := wgParams(256, 128, 64, 2, true)
	fp16Split.SetFlag("fp16", true)
	for _, tc := range []struct {
		name string
		p    ir.Params
		want string
	}{
		{"f32 cache", f32, "f32"},
		{"head_dim 32", wgParams(32, 128, 64, 2, true), "head_dim 32"},
		{"block_m 32", wgParams(256, 32, 64, 2, true), "block_m 32"},
		{"block_n 8", wgParams(256, 128, 8, 2, true), "block_n 8"},
		{"block_n 512", wgParams(256, 128, 512, 2, true), "block_n 512"},
		{"v_stages 3", wgParams(256, 128, 64, 3, true), "v_stages 3"},
		{"fp16 split", fp16Split, "fp16"},
		{"shared past the descriptors", wgParams(256, 128, 256, 2, true), "descriptors"},
	} {
		err := f.CheckParams(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
