// Package cliflag declares the numeric and duration flags of aimac and
// aima-engine with their bounds, checked while the command line is parsed:
// a value out of range is refused with an error naming the flag instead of
// being replaced by a default further down.
package cliflag

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// intValue is an int flag bounded to [min, max].
type intValue struct {
	p        *int
	min, max int
}

func (v *intValue) String() string { return strconv.Itoa(*v.p) }
func (v *intValue) Type() string   { return "int" }

func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if err := inRange(n, int64(v.min), int64(v.max)); err != nil {
		return err
	}
	*v.p = int(n)
	return nil
}

// int64Value is an int64 flag bounded to [min, max].
type int64Value struct {
	p        *int64
	min, max int64
}

func (v *int64Value) String() string { return strconv.FormatInt(*v.p, 10) }
func (v *int64Value) Type() string   { return "int64" }

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if err := inRange(n, v.min, v.max); err != nil {
		return err
	}
	*v.p = n
	return nil
}

// inRange says what is wrong with n, the flag's name being added by pflag
// (`invalid argument "-1" for "--queue-depth" flag: want ≥ 1`).
func inRange(n, min, max int64) error {
	switch {
	case n < min && max == math.MaxInt64:
		return fmt.Errorf("want ≥ %d", min)
	case n < min || n > max:
		return fmt.Errorf("want %d to %d", min, max)
	}
	return nil
}

// Int defines an int flag that refuses values below min.
func Int(fs *pflag.FlagSet, p *int, name string, value, min int, usage string) {
	IntRange(fs, p, name, value, min, math.MaxInt, usage)
}

// IntRange defines an int flag that refuses values outside [min, max].
func IntRange(fs *pflag.FlagSet, p *int, name string, value, min, max int, usage string) {
	*p = value
	fs.Var(&intValue{p: p, min: min, max: max}, name, usage)
}

// Int64 defines an int64 flag that refuses values below min.
func Int64(fs *pflag.FlagSet, p *int64, name string, value, min int64, usage string) {
	Int64Range(fs, p, name, value, min, math.MaxInt64, usage)
}

// Int64Range defines an int64 flag that refuses values outside [min, max].
func Int64Range(fs *pflag.FlagSet, p *int64, name string, value, min, max int64, usage string) {
	*p = value
	fs.Var(&int64Value{p: p, min: min, max: max}, name, usage)
}

// MiB defines a size flag in MiB, at least min, small enough that its
// bytes fit an int64.
func MiB(fs *pflag.FlagSet, p *int64, name string, value, min int64, usage string) {
	Int64Range(fs, p, name, value, min, math.MaxInt64>>20, usage)
}

// Port defines a TCP port flag: 0 to 65535 (0: any free port).
func Port(fs *pflag.FlagSet, p *int, name string, value int, usage string) {
	IntRange(fs, p, name, value, 0, 65535, usage)
}

// durationValue is a duration flag that refuses negative values, and zero
// unless zero means something to the flag.
type durationValue struct {
	p         *time.Duration
	allowZero bool
}

func (v *durationValue) String() string { return v.p.String() }
func (v *durationValue) Type() string   { return "duration" }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (like 30s, 5m or 1h30m)")
	}
	switch {
	case d < 0:
		return fmt.Errorf("want a positive duration")
	case d == 0 && !v.allowZero:
		return fmt.Errorf("want a positive duration, not 0")
	}
	*v.p = d
	return nil
}

// Duration defines a duration flag that must be positive.
func Duration(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p: p}, name, usage)
}

// DurationOrZero defines a duration flag that must not be negative; zero
// is left to the flag to give a meaning ("no limit").
func DurationOrZero(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{p: p, allowZero: true}, name, usage)
}

// Bounded reports whether f was declared through this package, so a test
// can hold every numeric flag of a command to a bound.
func Bounded(f *pflag.Flag) bool {
	switch f.Value.(type) {
	case *intValue, *int64Value, *durationValue:
		return true
	}
	return false
}
