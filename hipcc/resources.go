package hipcc

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Resources is the per-kernel resource report of a code object. AMD fields
// come from the code object's metadata notes, NVIDIA fields from ptxas -v.
type Resources struct {
	// AMD (amdhsa.kernels metadata).
	VGPRs        int `json:"vgprs,omitempty"`         // .vgpr_count
	SGPRs        int `json:"sgprs,omitempty"`         // .sgpr_count
	LDSBytes     int `json:"lds_bytes,omitempty"`     // .group_segment_fixed_size
	ScratchBytes int `json:"scratch_bytes,omitempty"` // .private_segment_fixed_size
	VGPRSpills   int `json:"vgpr_spills,omitempty"`   // .vgpr_spill_count
	SGPRSpills   int `json:"sgpr_spills,omitempty"`   // .sgpr_spill_count
	// NVIDIA (ptxas -v).
	Registers   int `json:"registers,omitempty"`    // "Used N registers"
	SharedBytes int `json:"shared_bytes,omitempty"` // "N bytes smem"
	SpillStores int `json:"spill_stores,omitempty"` // "N bytes spill stores"
	SpillLoads  int `json:"spill_loads,omitempty"`  // "N bytes spill loads"
	StackBytes  int `json:"stack_bytes,omitempty"`  // "N bytes stack frame"
}

// Spills describes why a kernel counts as spilling (scratch or local memory
// in use), or returns "" when it does not; one definition for every caller.
func (r Resources) Spills() string {
	var why []string
	if r.ScratchBytes > 0 {
		why = append(why, fmt.Sprintf("%d bytes scratch (.private_segment_fixed_size)", r.ScratchBytes))
	}
	if r.VGPRSpills > 0 {
		why = append(why, fmt.Sprintf("%d VGPRs spilled", r.VGPRSpills))
	}
	if r.SGPRSpills > 0 {
		why = append(why, fmt.Sprintf("%d SGPRs spilled", r.SGPRSpills))
	}
	if r.SpillStores > 0 || r.SpillLoads > 0 {
		why = append(why, fmt.Sprintf("%d bytes spill stores, %d bytes spill loads", r.SpillStores, r.SpillLoads))
	}
	return strings.Join(why, ", ")
}

// max returns the element-wise maximum, the budget-relevant summary of
// several kernels in one object.
func (r Resources) max(o Resources) Resources {
	m := func(a, b int) int { return max(a, b) }
	return Resources{
		VGPRs: m(r.VGPRs, o.VGPRs), SGPRs: m(r.SGPRs, o.SGPRs), LDSBytes: m(r.LDSBytes, o.LDSBytes),
		ScratchBytes: m(r.ScratchBytes, o.ScratchBytes), VGPRSpills: m(r.VGPRSpills, o.VGPRSpills),
		SGPRSpills: m(r.SGPRSpills, o.SGPRSpills), Registers: m(r.Registers, o.Registers),
		SharedBytes: m(r.SharedBytes, o.SharedBytes), SpillStores: m(r.SpillStores, o.SpillStores),
		SpillLoads: m(r.SpillLoads, o.SpillLoads), StackBytes: m(r.StackBytes, o.StackBytes),
	}
}

// amdFields maps the amdhsa.kernels keys we read to their Resources field.
var amdFields = map[string]func(*Resources) *int{
	".vgpr_count":                 func(r *Resources) *int { return &r.VGPRs },
	".sgpr_count":                 func(r *Resources) *int { return &r.SGPRs },
	".group_segment_fixed_size":   func(r *Resources) *int { return &r.LDSBytes },
	".private_segment_fixed_size": func(r *Resources) *int { return &r.ScratchBytes },
	".vgpr_spill_count":           func(r *Resources) *int { return &r.VGPRSpills },
	".sgpr_spill_count":           func(r *Resources) *int { return &r.SGPRSpills },
}

// ParseAMDNotes reads the resource report of every kernel from the output of
// `llvm-readelf --notes` on an AMD code object: the amdhsa.kernels list of
// the NT_AMDGPU_METADATA note, keyed by .name. Keys of nested lists (.args
// entries have their own .name) are ignored by indentation.
func ParseAMDNotes(notes string) (map[string]Resources, error) {
	out := map[string]Resources{}
	inKernels, sawKernels := false, false
	itemIndent := -1 // column of "- " that starts a kernel
	var cur *Resources
	var curName string
	lineNo := 0
	flush := func() error {
		if cur == nil {
			return nil
		}
		if curName == "" {
			return fmt.Errorf("amdhsa.kernels entry ending before line %d has no .name", lineNo)
		}
		if _, dup := out[curName]; dup {
			return fmt.Errorf("kernel %q listed twice", curName)
		}
		out[curName] = *cur
		cur, curName = nil, ""
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(notes))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if trimmed == "" {
			continue
		}
		if !inKernels {
			if indent == 0 && trimmed == "amdhsa.kernels:" {
				inKernels, sawKernels, itemIndent = true, true, -1
			}
			continue
		}
		// A key at column 0 (amdhsa.target:, ---, ...) ends the list.
		if indent == 0 && !strings.HasPrefix(trimmed, "- ") {
			if err := flush(); err != nil {
				return nil, err
			}
			inKernels = false
			if trimmed == "amdhsa.kernels:" {
				inKernels, itemIndent = true, -1
			}
			continue
		}
		keyCol := indent
		if strings.HasPrefix(trimmed, "- ") && (itemIndent < 0 || indent == itemIndent) {
			if itemIndent < 0 {
				itemIndent = indent
			}
			if err := flush(); err != nil {
				return nil, err
			}
			cur = &Resources{}
			trimmed = strings.TrimLeft(trimmed[2:], " ")
			keyCol = len(line) - len(trimmed)
		}
		if cur == nil || keyCol != itemIndent+2 {
			continue // nested (.args) or not part of a kernel entry
		}
		key, val, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if key == ".name" {
			curName = unquoteYAML(val)
			continue
		}
		if f := amdFields[key]; f != nil {
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s: %q is not an integer", lineNo, key, val)
			}
			*f(cur) = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if !sawKernels {
		return nil, fmt.Errorf("no amdhsa.kernels metadata in the notes (not an AMD HSA code object?)")
	}
	return out, nil
}

// unquoteYAML strips the quotes YAML puts around names that need them.
func unquoteYAML(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'') {
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

var (
	ptxasEntryRE = regexp.MustCompile(`^ptxas info\s*: Compiling entry function '([^']+)'`)
	ptxasPropsRE = regexp.MustCompile(`^ptxas info\s*: Function properties for (\S+)`)
	ptxasStackRE = regexp.MustCompile(`^\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasUsedRE  = regexp.MustCompile(`^ptxas info\s*: Used (\d+) registers`)
	ptxasSmemRE  = regexp.MustCompile(`(\d+) bytes smem`)
)

// ParsePtxasVerbose reads the per-function resource report from ptxas -v
// output (as printed by nvcc -Xptxas -v): registers and shared memory from
// the "Used" line following "Compiling entry function", stack and spills from
// the line after "Function properties for". Non-entry device functions that
// ptxas reports properties for are included too, since their spills count.
func ParsePtxasVerbose(log string) (map[string]Resources, error) {
	out := map[string]Resources{}
	entry := "" // current entry function, for "Used" lines
	props := "" // function named by the preceding "Function properties for"
	lineNo := 0
	for line := range strings.Lines(log) {
		lineNo++
		line = strings.TrimRight(line, "\r\n")
		if m := ptxasEntryRE.FindStringSubmatch(line); m != nil {
			entry, props = m[1], ""
			out[entry] = out[entry]
			continue
		}
		if m := ptxasPropsRE.FindStringSubmatch(line); m != nil {
			props = m[1]
			continue
		}
		if m := ptxasStackRE.FindStringSubmatch(line); m != nil {
			if props == "" {
				return nil, fmt.Errorf("ptxas line %d: stack/spill line without a preceding \"Function properties for\"", lineNo)
			}
			r := out[props]
			r.StackBytes, r.SpillStores, r.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
			out[props] = r
			props = ""
			continue
		}
		if m := ptxasUsedRE.FindStringSubmatch(line); m != nil {
			if entry == "" {
				return nil, fmt.Errorf("ptxas line %d: \"Used\" line without a preceding \"Compiling entry function\"", lineNo)
			}
			r := out[entry]
			r.Registers = atoi(m[1])
			if s := ptxasSmemRE.FindStringSubmatch(line); s != nil {
				r.SharedBytes = atoi(s[1])
			}
			out[entry] = r
			continue
		}
	}
	return out, nil
}

// atoi converts a string the regular expressions already proved is digits.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
