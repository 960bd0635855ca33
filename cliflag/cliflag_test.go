package cliflag

import (
	"io"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

type values struct {
	depth   int
	port    int
	bytes   int64
	drain   time.Duration
	limit   time.Duration
	mib     int64
	flagSet *pflag.FlagSet
}

func newValues() *values {
	v := &values{flagSet: pflag.NewFlagSet("t", pflag.ContinueOnError)}
	fs := v.flagSet
	fs.SetOutput(io.Discard)
	Int(fs, &v.depth, "queue-depth", 16, 1, "requests that may wait")
	Port(fs, &v.port, "port", 8000, "port")
	Int64(fs, &v.bytes, "max-body-bytes", 4<<20, 1, "body limit")
	Duration(fs, &v.drain, "drain-timeout", 30*time.Second, "drain")
	DurationOrZero(fs, &v.limit, "time-limit", 0, "limit (0: none)")
	MiB(fs, &v.mib, "cache-mib", 16, 0, "cache")
	return v
}

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*values) any
		want    any
	}{
		{args: nil, check: func(v *values) any { return []any{v.depth, v.port, v.bytes, v.drain, v.limit} },
			want: []any{16, 8000, int64(4 << 20), 30 * time.Second, time.Duration(0)}},
		{args: []string{"--queue-depth", "3", "--port", "0", "--max-body-bytes", "1", "--drain-timeout", "1ms", "--time-limit", "0"},
			check: func(v *values) any { return []any{v.depth, v.port, v.bytes, v.drain, v.limit} },
			want:  []any{3, 0, int64(1), time.Millisecond, time.Duration(0)}},
		{args: []string{"--queue-depth", "-1"}, wantErr: `invalid argument "-1" for "--queue-depth" flag: want ≥ 1`},
		{args: []string{"--queue-depth", "0"}, wantErr: `invalid argument "0" for "--queue-depth" flag: want ≥ 1`},
		{args: []string{"--queue-depth", "x"}, wantErr: `invalid argument "x" for "--queue-depth" flag: not an integer`},
		{args: []string{"--queue-depth", "99999999999999999999"}, wantErr: `invalid argument "99999999999999999999" for "--queue-depth" flag: not an integer`},
		{args: []string{"--port", "65536"}, wantErr: `invalid argument "65536" for "--port" flag: want 0 to 65535`},
		{args: []string{"--port", "-1"}, wantErr: `invalid argument "-1" for "--port" flag: want 0 to 65535`},
		{args: []string{"--max-body-bytes", "-5"}, wantErr: `invalid argument "-5" for "--max-body-bytes" flag: want ≥ 1`},
		{args: []string{"--drain-timeout", "-1s"}, wantErr: `invalid argument "-1s" for "--drain-timeout" flag: want a positive duration`},
		{args: []string{"--drain-timeout", "0"}, wantErr: `invalid argument "0" for "--drain-timeout" flag: want a positive duration, not 0`},
		{args: []string{"--drain-timeout", "30"}, wantErr: `invalid argument "30" for "--drain-timeout" flag: not a duration (like 30s, 5m or 1h30m)`},
		{args: []string{"--cache-mib", "8796093022208"}, wantErr: `invalid argument "8796093022208" for "--cache-mib" flag: want 0 to 8796093022207`},
		{args: []string{"--cache-mib", "8796093022207"}, check: func(v *values) any { return v.mib << 20 }, want: int64(math.MaxInt64 &^ (1<<20 - 1))},
		{args: []string{"--time-limit", "-1m"}, wantErr: `invalid argument "-1m" for "--time-limit" flag: want a positive duration`},
	}
	for _, tt := range tests {
		v := newValues()
		err := v.flagSet.Parse(tt.args)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.wantErr {
			t.Errorf("%v: error %q, want %q", tt.args, got, tt.wantErr)
			continue
		}
		if tt.check != nil {
			if diff := cmp.Diff(tt.want, tt.check(v)); diff != "" {
				t.Errorf("%v: (-want +got)\n%s", tt.args, diff)
			}
		}
	}
}

// TestHelp: defaults print as pflag prints its own kinds, and Bounded
// tells these flags from plain ones.
func TestHelp(t *testing.T) {
	v := newValues()
	var plain int
	v.flagSet.IntVar(&plain, "plain", 1, "an unchecked int")
	got := map[string]string{}
	bounded := map[string]bool{}
	v.flagSet.VisitAll(func(f *pflag.Flag) { got[f.Name], bounded[f.Name] = f.DefValue, Bounded(f) })
	want := map[string]string{"cache-mib": "16", "queue-depth": "16", "port": "8000", "max-body-bytes": "4194304", "drain-timeout": "30s", "time-limit": "0s", "plain": "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got)\n%s", diff)
	}
	wantBounded := map[string]bool{"cache-mib": true, "queue-depth": true, "port": true, "max-body-bytes": true, "drain-timeout": true, "time-limit": true, "plain": false}
	if diff := cmp.Diff(wantBounded, bounded); diff != "" {
		t.Errorf("Bounded (-want +got)\n%s", diff)
	}
}

// TestAudit: the audit finds a flag without a placeholder, an unbounded
// number, and passes the well-declared ones and the allowed exceptions.
func TestAudit(t *testing.T) {
	root := &cobra.Command{Use: "tool"}
	sub := &cobra.Command{Use: "sub", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub)
	var n, depth int
	var seed uint64
	var dir string
	var quiet bool
	var d time.Duration
	sub.Flags().IntVar(&n, "count", 1, "how many")
	sub.Flags().StringVar(&dir, "model-dir", "", "made by `aimac plan`")
	sub.Flags().Uint64Var(&seed, "seed", 1, "random `SEED`")
	sub.Flags().BoolVar(&quiet, "quiet", false, "say less")
	Int(sub.Flags(), &depth, "queue-depth", 16, 1, "`N` requests")
	Duration(root.Flags(), &d, "timeout", time.Second, "a `DURATION`")
	got := Audit(root, map[string]string{"seed": "any"})
	want := []string{
		`tool sub --count: help shows "int" for its value: name a placeholder in backquotes`,
		`tool sub --count: a int flag without bounds (declare it with cliflag)`,
		`tool sub --model-dir: help shows "aimac plan" for its value: name a placeholder in backquotes`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if depth != 16 || d != time.Second {
		t.Errorf("the audit changed values: %d, %v", depth, d)
	}
}
