package cliflag

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// placeholder is what a flag's help shows for its value: a word in
// capitals (DIR, FILE, N, MiB), written in backquotes in the usage.
var placeholder = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)

// numeric are the pflag kinds whose values have a range.
var numeric = map[string]bool{"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true,
	"float32": true, "float64": true, "duration": true, "intSlice": true, "int32Slice": true, "int64Slice": true}

// Audit walks a command tree and lists every flag that breaks the rules
// of the two commands: a value flag's help names a placeholder, and a
// numeric flag is declared through this package (so a value out of range
// is refused naming it) unless unbounded names it, with the reason. Each
// bounded flag is also given a value below its minimum (-1s for a
// duration), which must be refused.
func Audit(root *cobra.Command, unbounded map[string]string) []string {
	var probs []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			where := fmt.Sprintf("%s --%s", c.CommandPath(), f.Name)
			if f.Name == "help" || f.Value.Type() == "bool" {
				return
			}
			if name, _ := pflag.UnquoteUsage(f); !placeholder.MatchString(name) {
				probs = append(probs, fmt.Sprintf("%s: help shows %q for its value: name a placeholder in backquotes", where, name))
			}
			if !numeric[f.Value.Type()] {
				return
			}
			if !Bounded(f) {
				if _, ok := unbounded[f.Name]; !ok {
					probs = append(probs, fmt.Sprintf("%s: a %s flag without bounds (declare it with cliflag)", where, f.Value.Type()))
				}
				return
			}
			bad := below(f.Value)
			before := f.Value.String()
			err := f.Value.Set(bad)
			if err == nil {
				probs = append(probs, fmt.Sprintf("%s: %s accepted", where, bad))
			}
			if f.Value.String() != before {
				probs = append(probs, fmt.Sprintf("%s: a refused value changed it from %s to %s", where, before, f.Value.String()))
			}
			if err != nil && !strings.HasPrefix(err.Error(), "want ") {
				probs = append(probs, fmt.Sprintf("%s: refuses %s with %q", where, bad, err))
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return probs
}

// below is a value under the flag's minimum.
func below(v pflag.Value) string {
	switch v := v.(type) {
	case *intValue:
		return strconv.FormatInt(int64(v.min)-1, 10)
	case *int64Value:
		return strconv.FormatInt(v.min-1, 10)
	}
	return "-1s"
}
