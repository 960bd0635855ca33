package runtime

import (
	"strings"
	"testing"

	"github.com/aimaproject/aimac/plan"
)

func TestMemoryOf(t *testing.T) {
	p := &plan.Plan{ArenaBytes: 100, Buffers: []plan.Buffer{
		{Role: "weight", Bytes: 1000}, {Role: "kv", Bytes: 200}, {Role: "state", Bytes: 30},
		{Role: "output", Bytes: 7}, {Role: "input", Bytes: 3},
	}}
	m := MemoryOf(p, 50)
	if m.Weights != 1000 || m.KV != 200 || m.State != 30 || m.Buffers != 10 || m.Allocated() != 390 || m.Total() != 1390 {
		t.Errorf("memory %+v", m)
	}
	if s := m.String(); !strings.Contains(s, "KV cache") || !strings.Contains(s, "1.4 KiB") {
		t.Errorf("memory plan text:\n%s", s)
	}
	for n, want := range map[int64]string{5: "5 B", 2048: "2.0 KiB", 5 << 30: "5.0 GiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
