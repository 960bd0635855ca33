package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFrom(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/aimaproject/aimac", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "dad7e44e1f0c2b3a4d5e6f708192a3b4c5d6e7f8"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	tests := []struct {
		name  string
		bi    *debug.BuildInfo
		want  Info
		short string
	}{
		{"no build info", nil, Info{Version: Devel, Commit: Unknown, Go: "go1.x"}, Unknown},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/aimaproject/aimac", Version: "(devel)"}},
			Info{Module: "github.com/aimaproject/aimac", Version: Devel, Commit: Unknown, Go: "go1.26.0"}, Unknown},
		{"stamped", stamped, Info{Module: "github.com/aimaproject/aimac", Version: "v0.3.0", Commit: "dad7e44e1f0c2b3a4d5e6f708192a3b4c5d6e7f8",
			CommitTime: "2026-12-01T10:00:00Z", Modified: true, Go: "go1.26.0"}, "dad7e44e1f0c+dirty"},
	}
	for _, tt := range tests {
		got := From(tt.bi, "go1.x")
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
		}
		if s := got.Short(); s != tt.short {
			t.Errorf("%s: Short() = %q, want %q", tt.name, s, tt.short)
		}
	}
}

// TestRead: a test binary has build info with the module path.
func TestRead(t *testing.T) {
	if got := Read(); got.Go == "" || got.Version == "" || got.Commit == "" {
		t.Errorf("Read() = %+v: empty fields", got)
	}
}
