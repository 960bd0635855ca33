package hipcc

import (
	"fmt"
	"os"
	"strings"

	"github.com/mattn/go-shellwords"
)

// FlagsEnv is the environment variable holding extra device-compiler flags
// when no --device-flags option is given.
const FlagsEnv = "AIMAC_DEVICE_FLAGS"

// SplitFlags splits a user flag string with POSIX shell quoting (single and
// double quotes, backslash escapes), so flags with spaces survive; it rejects
// unbalanced quotes and shell operators (; & | < > and parentheses) instead of
// silently dropping what follows them. No variable or command expansion is
// done.
func SplitFlags(s string) ([]string, error) {
	p := shellwords.NewParser()
	p.ParseEnv = false
	p.ParseBacktick = false
	args, err := p.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("device flags %q: %v (check quotes and escapes)", s, err)
	}
	if p.Position >= 0 {
		return nil, fmt.Errorf("device flags %q: shell operator at byte %d; quote it if it belongs to a flag", s, p.Position)
	}
	return args, nil
}

// UserFlags returns the user's extra flags: option (the --device-flags value)
// when non-empty, else $AIMAC_DEVICE_FLAGS, so both reach the compiler the
// same way.
func UserFlags(option string) ([]string, error) {
	if strings.TrimSpace(option) != "" {
		return SplitFlags(option)
	}
	return SplitFlags(os.Getenv(FlagsEnv))
}
