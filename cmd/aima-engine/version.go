package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/buildinfo"
	"github.com/aimaproject/aimac/doctor"
)

// versionReport is what `version --json` prints.
type versionReport struct {
	Program string `json:"program"`
	buildinfo.Info
	Targets []doctor.Target `json:"targets"`
}

func versionOf() versionReport {
	return versionReport{Program: "aima-engine", Info: buildinfo.Read(), Targets: doctor.Targets(nil)}
}

// writeVersion prints the version for a person: build, then one line per
// target with whether this machine can drive it.
func writeVersion(w io.Writer, v versionReport) {
	mod := ""
	if v.Modified {
		mod = " (modified)"
	}
	fmt.Fprintf(w, "%s %s\n  module  %s\n  commit  %s%s\n  go      %s\n", v.Program, v.Version, v.Module, v.Commit, mod, v.Go)
	for i, t := range v.Targets {
		label := ""
		if i == 0 {
			label = "targets"
		}
		state := "no"
		if t.Available {
			state = "yes"
		}
		fmt.Fprintf(w, "  %-7s %s via %s: %s (%s)\n", label, t.Name, t.Via, state, t.Detail)
	}
}

func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, source commit, Go release and the targets this machine can drive",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionOf()
			if !asJSON {
				writeVersion(cmd.OutOrStdout(), v)
				return nil
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print it as a JSON object")
	return c
}

// versionFlag gives the root command --version, which prints what
// `version` prints (the targets are probed only when asked).
func versionFlag(c *cobra.Command) {
	var show bool
	c.Flags().BoolVar(&show, "version", false, "print the version and the targets, and exit")
	c.Args = cobra.NoArgs
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if !show {
			return cmd.Help()
		}
		writeVersion(cmd.OutOrStdout(), versionOf())
		return nil
	}
}
