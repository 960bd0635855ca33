package main

import (
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// progress draws a byte progress bar on the command's stderr.
func progress(cmd *cobra.Command) func(done, total int64) {
	var bar *progressbar.ProgressBar
	return func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
				progressbar.OptionShowBytes(true), progressbar.OptionSetDescription("writing"),
				progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(done)
	}
}
