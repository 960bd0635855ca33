package loader

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// weightsBar draws the weights' upload on w.
func weightsBar(w io.Writer) (report func(done, total int64), finish func()) {
	return ProgressBar(w, "weights")
}

// ProgressBar draws work of bytes on w as a bar labelled what, with the
// rate and the time left; finish clears it (the bar clears itself when the
// work completes, finish also when it failed). report may be called from
// one goroutine at a time.
func ProgressBar(w io.Writer, what string) (report func(done, total int64), finish func()) {
	var bar *progressbar.ProgressBar
	report = func(done, total int64) {
		if total <= 0 {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(what), progressbar.OptionShowBytes(true),
				progressbar.OptionShowCount(), progressbar.OptionUseIECUnits(true),
				progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(done)
	}
	finish = func() {
		if bar != nil && !bar.IsFinished() {
			_ = bar.Clear()
			_ = bar.Exit()
		}
	}
	return report, finish
}
