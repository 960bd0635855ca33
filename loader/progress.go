package loader

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// weightsBar draws the weights' upload on w as a bar of bytes with the rate
// and the time left; finish clears it (the bar clears itself when the
// upload completes, finish also when it failed).
func weightsBar(w io.Writer) (report func(done, total int64), finish func()) {
	var bar *progressbar.ProgressBar
	report = func(done, total int64) {
		if total <= 0 {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("weights"), progressbar.OptionShowBytes(true),
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
