package runtime

import "fmt"

// DeviceInfo is what a GPU backend reports of its device 0 without opening
// it for a plan: enough for `aima-engine doctor` to say whether a plan fits
// and which target the device runs.
type DeviceInfo struct {
	API        string // "CUDA" or "HIP"
	Name       string // as the driver names it
	Major      int    // compute capability
	Minor      int
	Driver     string // the driver's (HIP: the runtime's) version
	FreeBytes  int64  // device memory free now
	TotalBytes int64
	// Target is the plan target the device runs ("sm_90", "gfx1151"); ""
	// when this build has no code for it.
	Target string
}

// String is the device in one line, as doctor prints it.
func (d DeviceInfo) String() string {
	target := "no target of this build runs it"
	if d.Target != "" {
		target = "runs " + d.Target
	}
	return fmt.Sprintf("%s %s: compute capability %d.%d, %s free of %s, driver %s, %s",
		d.API, d.Name, d.Major, d.Minor, HumanBytes(d.FreeBytes), HumanBytes(d.TotalBytes), d.Driver, target)
}
