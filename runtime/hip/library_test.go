package hip

import (
	"testing"

	"github.com/aimaproject/aimac/runtime/gpu"
	"github.com/aimaproject/aimac/runtime/gpu/gputest"
)

// TestSymbols: every entry point of the backend's driver table is bound
// once (the occupancy query where the library has it), but the three HIP
// lacks.
func TestSymbols(t *testing.T) {
	var p probe
	var d gpu.Driver
	gputest.Bound(t, &d, append(symbols(&p, &d), optionalSymbols(&d)...), "FuncSetAttribute", "LaunchKernelEx", "EventRecordWithFlags")
}
