package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/sums"
)

func verifyCmd() *cobra.Command {
	var dir string
	var write bool
	var o sums.Options
	c := &cobra.Command{
		Use:   "verify",
		Short: "Hash every file of a model directory against its SHA256SUMS manifest",
		Long: `Hash every file of --model-dir (in parallel, with a progress bar on a
terminal) and hold it to DIR/SHA256SUMS: a damaged file, a missing one and one
the manifest does not list are each named, and the command fails.

--write-manifest writes the manifest instead (atomically), from a copy known to
be good; it refuses to replace an existing one. The manifest is in sha256sum's
format, so "cd DIR && sha256sum -c SHA256SUMS" checks it too. It covers every
regular file under DIR except names beginning with a dot (.cache/ and the like).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--model-dir is required")
			}
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return fmt.Errorf("--model-dir %s: not a readable directory", dir)
			}
			finish := func() {}
			if w := terminal(cmd.ErrOrStderr()); w != nil {
				o.Progress, finish = loader.ProgressBar(w, "sha256")
			}
			out := cmd.OutOrStdout()
			manifest := filepath.Join(dir, sums.File)
			if write {
				if _, err := os.Stat(manifest); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("%s exists: verify against it, or remove it to write a new one", manifest)
				}
				entries, err := sums.Write(cmd.Context(), dir, o)
				finish()
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s: %d files\n", manifest, len(entries))
				return nil
			}
			rep, err := sums.Verify(cmd.Context(), dir, o)
			finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %d files, %s, match %s\n", dir, rep.Files, runtime.HumanBytes(rep.Bytes), sums.File)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "model-dir", "", "checkpoint `DIR` to verify (required)")
	c.Flags().BoolVar(&write, "write-manifest", false, "write DIR/"+sums.File+" instead of checking it")
	cliflag.Int(c.Flags(), &o.Jobs, "jobs", 0, 0, "files hashed at once, `N` (0: one per CPU)")
	return c
}
