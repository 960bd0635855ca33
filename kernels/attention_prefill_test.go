package kernels

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
)

// TestPrefillFigures pins the shared memory, products per pair and FLOPs
// that the planner's tile choice and the speed cases' TFLOP/s rest on, at
// the real model's heads (16 query, 2 KV, 256 dims): the default bf16-KV
// kernel (q and p split) needs 212 992 bytes, within sm_90's 227 KiB; an
// 8K prompt is 0.55 TFLOP a layer, the last 8K bucket of a 32K prompt 3.85,
// and positions past the capacity count no more.
func TestPrefillFigures(t *testing.T) {
	params := func(bm, bn int, bf16, splitQP, splitKV bool, capacity int) ir.Params {
		var p ir.Params
		for name, v := range map[string]int{"q_heads": 16, "kv_heads": 2, "head_dim": 256, "capacity": capacity, "width": 512, "block_m": bm, "block_n": bn} {
			p.SetInt(name, int64(v))
		}
		p.SetFlag("kv_bf16", bf16)
		p.SetFlag("split_q", splitQP)
		p.SetFlag("split_p", splitQP)
		p.SetFlag("split_kv", splitKV)
		return p
	}
	type figures struct {
		Shared, MMAs int
		FLOPs        int64
	}
	for _, tc := range []struct {
		name   string
		p      ir.Params
		n, pos int
		want   figures
	}{
		{"bf16 split 8K", params(128, 64, true, true, false, 8192), 8192, 0, figures{212992, 4, 549822922752}},
		{"bf16 plain 8K", params(128, 64, true, false, false, 8192), 8192, 0, figures{147456, 2, 549822922752}},
		{"bf16 split 128x32", params(128, 32, true, true, false, 8192), 8192, 0, figures{172032, 4, 549822922752}},
		{"f32 split", params(128, 32, false, true, true, 8192), 8192, 0, figures{204800, 6, 549822922752}},
		{"gfx1151 plain", params(64, 16, true, false, false, 8192), 8192, 0, figures{51200, 2, 549822922752}},
		{"32K bucket", params(128, 64, true, true, false, 32768), 8192, 24576, figures{212992, 4, 3848357806080}},
		// 4 rows from capacity − 2: the last two see the whole cache only.
		{"past capacity", params(128, 64, true, true, false, 100), 4, 98, figures{212992, 4, 16384 * (99 + 100 + 100 + 100)}},
	} {
		got := figures{PrefillSharedBytes(tc.p), PrefillMMAs(tc.p), PrefillFLOPs(tc.p, tc.n, tc.pos)}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
