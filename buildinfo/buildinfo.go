// Package buildinfo is what a binary knows of its own build: the module
// and its version, the source commit stamped by `go build` from the VCS
// (and whether the tree had local changes), and the Go release.
package buildinfo

import (
	goruntime "runtime"
	"runtime/debug"
)

// Unknown stands for a commit the build did not stamp (`go run`, tests,
// a build outside a checkout or with -buildvcs=false); Devel for a module
// version it did not stamp.
const (
	Unknown = "unknown"
	Devel   = "devel"
)

// Info describes a build.
type Info struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"` // built from a tree with uncommitted changes
	Go         string `json:"go"`
}

// Read describes the running binary.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return From(bi, goruntime.Version())
}

// From describes a build from its build info (nil when there is none) and
// the Go release that made it.
func From(bi *debug.BuildInfo, goVersion string) Info {
	info := Info{Version: Devel, Commit: Unknown, Go: goVersion}
	if bi == nil {
		return info
	}
	info.Module = bi.Main.Path
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Commit = s.Value
			}
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// Short is the commit's first 12 hex digits, "+dirty" when the tree had
// changes; Unknown when not stamped.
func (i Info) Short() string {
	c := i.Commit
	if c == Unknown {
		return c
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "+dirty"
	}
	return c
}
