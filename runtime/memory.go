package runtime

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aimaproject/aimac/plan"
)

// Memory is what a plan needs resident, by kind.
type Memory struct {
	Weights int64 // checkpoint tensors (mapped from the file on the CPU)
	// Derived are the weights the load step makes on the device (the
	// certified head's int8 rows and scales, half the BF16 head's bytes
	// more: the BF16 head stays for the candidates and for sampling).
	Derived     int64
	KV          int64 // KV caches, sized by the context
	State       int64 // GDN recurrent and conv states
	Activations int64 // the arena of the largest phase
	Buffers     int64 // inputs and outputs (tokens, hidden rows, logits)
	PrefixCache int64 // the prefix cache's byte bound
}

// MemoryOf sums a plan's buffers; prefixCache is the cache's byte bound.
func MemoryOf(p *plan.Plan, prefixCache int64) Memory {
	m := Memory{Activations: p.ArenaBytes, PrefixCache: prefixCache}
	for _, b := range p.Buffers {
		switch b.Role {
		case "weight":
			if b.Derive != nil {
				m.Derived += b.Bytes
			} else {
				m.Weights += b.Bytes
			}
		case "kv":
			m.KV += b.Bytes
		case "state":
			m.State += b.Bytes
		default:
			m.Buffers += b.Bytes
		}
	}
	return m
}

// Allocated is what the engine allocates besides weights it may map.
func (m Memory) Allocated() int64 {
	return m.Derived + m.KV + m.State + m.Activations + m.Buffers + m.PrefixCache
}

// Total is everything, weights included.
func (m Memory) Total() int64 { return m.Weights + m.Allocated() }

// String is the memory plan as printed at startup.
func (m Memory) String() string {
	var b strings.Builder
	row := func(name string, n int64) { fmt.Fprintf(&b, "  %-13s %10s\n", name, HumanBytes(n)) }
	b.WriteString("memory plan:\n")
	row("weights", m.Weights)
	if m.Derived > 0 {
		row("int8 LM head", m.Derived)
	}
	row("KV cache", m.KV)
	row("GDN/conv state", m.State)
	row("activations", m.Activations)
	row("buffers", m.Buffers)
	row("prefix cache", m.PrefixCache)
	row("total", m.Total())
	return b.String()
}

// HumanBytes writes a byte count in binary units.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// HostAvailable reads MemAvailable from /proc/meminfo (0 when unknown).
func HostAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
