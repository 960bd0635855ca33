package gpu_test

import (
	"testing"

	"github.com/aimaproject/aimac/runtime/gpu"
	"github.com/aimaproject/aimac/runtime/gpu/gputest"
)

func TestUploadRoundTrip(t *testing.T) {
	for _, dialect := range []string{"cuda", "hip"} {
		t.Run(dialect, func(t *testing.T) { gputest.UploadRoundTrip(t, gpu.FakeBackend(t, dialect)) })
	}
}
