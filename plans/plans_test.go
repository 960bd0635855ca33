package plans

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/aimaproject/aimac/plan"
)

var update = flag.Bool("update", false, "rewrite the frozen plans")

// TestFrozenPlansUpToDate regenerates every target's plan and diffs it
// against the checked-in file (go test ./plans -update rewrites them).
func TestFrozenPlansUpToDate(t *testing.T) {
	for _, target := range plan.Targets {
		p, err := Generate(target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		got := p.Bytes()
		if *update {
			if err := os.WriteFile(FileName(target), got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := Frozen(target)
		if err != nil {
			t.Fatalf("%s: %v (run go test ./plans -update)", target, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: frozen plan is out of date (run go test ./plans -update and review the diff)", FileName(target))
		}
		// The frozen file must also decode and validate as a user's plan file would.
		if _, err := plan.Decode(bytes.NewReader(want)); err != nil {
			t.Errorf("%s: %v", FileName(target), err)
		}
	}
}
