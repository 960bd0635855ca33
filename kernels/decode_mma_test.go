package kernels

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
)

// TestMMABlockHeads: the largest divisor of the group up to the product's
// 8 columns.
func TestMMABlockHeads(t *testing.T) {
	got := map[int]int{}
	for _, g := range []int{1, 2, 3, 6, 8, 12, 16, 7} {
		got[g] = MMABlockHeads(g)
	}
	want := map[int]int{1: 1, 2: 2, 3: 3, 6: 6, 8: 8, 12: 6, 16: 8, 7: 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MMABlockHeads (-want +got):\n%s", diff)
	}
}

// TestDecodeMMAGeometry: four warps and three stages on sm_90's 227 KiB at
// the real heads (208 KiB), two warps and one stage in gfx1151's 64 KiB,
// fewer warps where even that does not fit.
func TestDecodeMMAGeometry(t *testing.T) {
	type geo struct{ Warps, Stages int }
	sm90 := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10}
	gfx := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 64 << 10}
	tiny := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 40 << 10}
	got := map[string]geo{}
	for name, c := range map[string]struct {
		c ir.LaunchConfig
		d int
	}{"sm90_256": {sm90, 256}, "sm90_32": {sm90, 32}, "gfx_256": {gfx, 256}, "gfx_32": {gfx, 32}, "small_256": {tiny, 256}} {
		w, s, ok := DecodeMMAGeometry(c.c, c.d)
		if !ok {
			t.Errorf("%s: no geometry", name)
		}
		got[name] = geo{w, s}
	}
	want := map[string]geo{"sm90_256": {4, 3}, "sm90_32": {4, 3}, "gfx_256": {2, 1}, "gfx_32": {4, 3}, "small_256": {1, 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("geometry (-want +got):\n%s", diff)
	}
	if _, _, ok := DecodeMMAGeometry(ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 8 << 10}, 256); ok {
		t.Error("8 KiB of shared memory: a geometry for 256 dims")
	}
	p := ir.Params{}
	p.SetInt("head_dim", 256)
	p.SetInt("warps", 4)
	p.SetInt("ring_stages", 3)
	if got := DecodeMMASharedBytes(p); got != 208<<10 {
		t.Errorf("shared bytes %d, want %d", got, 208<<10)
	}
}

// TestDecodeMMAFits: the shapes the kernel serves, and an error naming
// what is wrong for those it does not.
func TestDecodeMMAFits(t *testing.T) {
	params := func(d, heads, warps, stages int, bf bool) ir.Params {
		p := ir.Params{}
		p.SetInt("head_dim", int64(d))
		p.SetInt("block_heads", int64(heads))
		p.SetInt("warps", int64(warps))
		p.SetInt("ring_stages", int64(stages))
		p.SetFlag("kv_bf16", bf)
		return p
	}
	for _, c := range []struct {
		p    ir.Params
		want string // "" when it fits
	}{
		{params(256, 8, 4, 3, true), ""},
		{params(32, 2, 4, 3, true), ""},
		{params(16, 1, 2, 1, true), ""},
		{params(192, 6, 4, 3, true), ""},
		{params(256, 8, 4, 3, false), "f32"},
		{params(48, 8, 4, 3, true), "head_dim 48"},
		{params(96, 8, 4, 3, true), "head_dim 96"},
		{params(512, 8, 4, 3, true), "head_dim 512"},
		{params(256, 16, 4, 3, true), "block_heads 16"},
		{params(256, 8, 9, 3, true), "warps 9"},
		{params(256, 8, 4, 0, true), "ring_stages 0"},
	} {
		err := DecodeMMAFits(c.p)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.p, err, c.want)
		}
	}
}
