package cuda

import (
	"strings"
	"testing"

	"github.com/aimaproject/aimac/runtime/gpu"
	"github.com/aimaproject/aimac/runtime/gpu/gputest"
)

// TestSymbols: every entry point of the backend's driver table is bound,
// once (the occupancy query where the library has it), to the symbol cuda.h's ABI names (the _v2 versions of the calls
// cuda.h maps to them); the error texts come from the probe's calls.
func TestSymbols(t *testing.T) {
	var p probe
	var d gpu.Driver
	syms := append(symbols(&p, &d), optionalSymbols(&d)...)
	gputest.Bound(t, &d, syms, "ErrorName", "ErrorString")
	v2 := map[string]bool{"cuMemAlloc": true, "cuMemFree": true, "cuMemGetInfo": true, "cuMemcpyHtoD": true, "cuMemcpyDtoH": true,
		"cuMemsetD8": true, "cuMemcpyHtoDAsync": true, "cuMemcpyDtoDAsync": true, "cuMemcpyDtoHAsync": true,
		"cuStreamDestroy": true, "cuEventDestroy": true, "cuStreamBeginCapture": true, "cuDevicePrimaryCtxRelease": true}
	for _, s := range syms {
		base, isV2 := strings.CutSuffix(s.Name, "_v2")
		if v2[base] != isV2 || !strings.HasPrefix(s.Name, "cu") {
			t.Errorf("symbol %s: cuda.h maps %s to %s_v2: %v", s.Name, base, base, v2[base])
		}
	}
}
