package metrics

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// family is one metric family as parsed from a scrape.
type family struct {
	typ     string
	samples map[string]float64 // sample key (name{labels}) -> value
}

// scrape serves a GET /metrics and parses the answer, checking the text
// format's rules on the way: HELP then TYPE before a family's samples,
// sample names that belong to the family's type, unique series, cumulative
// histogram buckets ending in +Inf equal to _count.
func scrape(t *testing.T, m *Metrics) (map[string]float64, map[string]*family) {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if got := rec.Header().Get("Content-Type"); got != ContentType {
		t.Fatalf("Content-Type = %q, want %q", got, ContentType)
	}
	body := rec.Body.String()
	if !strings.HasSuffix(body, "\n") {
		t.Fatalf("exposition does not end with a newline")
	}

	samples := map[string]float64{}
	families := map[string]*family{}
	var cur string
	helped := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		fail := func(format string, args ...any) {
			t.Fatalf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			if helped[name] {
				fail("second HELP for %s", name)
			}
			helped[name] = true
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if !helped[name] {
				fail("TYPE before HELP")
			}
			if families[name] != nil {
				fail("second TYPE for %s", name)
			}
			switch typ {
			case "counter", "gauge", "histogram":
			default:
				fail("unknown type %q", typ)
			}
			if typ == "counter" && !strings.HasSuffix(name, "_total") {
				fail("counter without _total")
			}
			families[name] = &family{typ: typ, samples: map[string]float64{}}
			cur = name
		case line == "" || strings.HasPrefix(line, "#"):
			fail("unexpected line")
		default:
			key, value, ok := strings.Cut(line, " ")
			if !ok {
				fail("no value")
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				fail("value: %v", err)
			}
			name, _, _ := strings.Cut(key, "{")
			f := families[cur]
			if f == nil {
				fail("sample before any TYPE")
			}
			want := []string{cur}
			if f.typ == "histogram" {
				want = []string{cur + "_bucket", cur + "_sum", cur + "_count"}
			}
			if !slices.Contains(want, name) {
				fail("sample %s outside family %s", name, cur)
			}
			if _, dup := samples[key]; dup {
				fail("duplicate series")
			}
			samples[key] = v
			f.samples[key] = v
		}
	}
	for name, f := range families {
		if f.typ == "histogram" {
			checkHistogram(t, name, f)
		}
	}
	return samples, families
}

// checkHistogram verifies that every series of a histogram family has
// non-decreasing buckets whose +Inf bucket equals its count.
func checkHistogram(t *testing.T, name string, f *family) {
	t.Helper()
	type series struct {
		last   float64
		inf    float64
		hasInf bool
		count  float64
	}
	all := map[string]*series{}
	get := func(labels string) *series {
		if all[labels] == nil {
			all[labels] = &series{last: -1}
		}
		return all[labels]
	}
	// Order each series' buckets by bound.
	type bucket struct {
		labels string
		le     float64
		v      float64
	}
	var buckets []bucket
	for key, v := range f.samples {
		n, labels, _ := strings.Cut(key, "{")
		labels = strings.TrimSuffix(labels, "}")
		switch n {
		case name + "_bucket":
			i := strings.LastIndex(labels, `le="`)
			if i < 0 {
				t.Fatalf("%s: bucket without le", key)
			}
			le, err := strconv.ParseFloat(strings.TrimSuffix(labels[i+4:], `"`), 64)
			if err != nil {
				t.Fatalf("%s: le: %v", key, err)
			}
			rest := strings.TrimSuffix(labels[:i], ",")
			buckets = append(buckets, bucket{rest, le, v})
		case name + "_count":
			get(labels).count = v
		}
	}
	slices.SortFunc(buckets, func(a, b bucket) int {
		if c := strings.Compare(a.labels, b.labels); c != 0 {
			return c
		}
		return cmp.Compare(a.le, b.le)
	})
	for _, b := range buckets {
		s := get(b.labels)
		if b.v < s.last {
			t.Errorf("%s{%s}: bucket le=%g is %g, below the previous %g", name, b.labels, b.le, b.v, s.last)
		}
		s.last = b.v
		if b.le > 1e308 {
			s.inf, s.hasInf = b.v, true
		}
	}
	for labels, s := range all {
		if !s.hasInf || s.inf != s.count {
			t.Errorf("%s{%s}: +Inf bucket %g (present %v) != count %g", name, labels, s.inf, s.hasInf, s.count)
		}
	}
}

// pick returns the values of the given keys (missing keys are absent).
func pick(samples map[string]float64, keys ...string) map[string]float64 {
	out := map[string]float64{}
	for _, k := range keys {
		if v, ok := samples[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestFresh(t *testing.T) {
	m := New(func() (int, int) { return 3, 1 })
	samples, families := scrape(t, m)
	want := map[string]float64{
		"aima_queue_depth":                       3,
		"aima_queue_running":                     1,
		"aima_prompt_tokens_total":               0,
		"aima_completion_tokens_total":           0,
		"aima_prefix_cache_hits_total":           0,
		"aima_prefix_cache_misses_total":         0,
		"aima_queue_wait_seconds_count":          0,
		"aima_queue_wait_seconds_sum":            0,
		`aima_ttft_seconds_bucket{le="+Inf"}`:    0,
		"aima_decode_tokens_per_second_count":    0,
		`aima_decode_tokens_per_second_sum`:      0,
		`aima_queue_wait_seconds_bucket{le="1"}`: 0,
		// Both tiers before the first hit.
		`aima_prefix_cache_restores_total{tier="device"}`:             0,
		`aima_prefix_cache_restores_total{tier="host"}`:               0,
		`aima_prefix_cache_restored_bytes_total{how="adopted"}`:       0,
		`aima_prefix_cache_restored_bytes_total{how="copied_device"}`: 0,
		`aima_prefix_cache_restored_bytes_total{how="copied_host"}`:   0,
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	if diff := gocmp.Diff(want, pick(samples, keys...)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	for _, name := range []string{"aima_requests_total", "aima_request_duration_seconds", "aima_ttft_part_seconds"} {
		if families[name] != nil {
			t.Errorf("%s is exposed before any request", name)
		}
	}
	for name := range families {
		if !strings.HasPrefix(name, "aima_") {
			t.Errorf("family %s lacks the aima_ prefix", name)
		}
	}
}

func TestNilQueueStats(t *testing.T) {
	samples, _ := scrape(t, New(nil))
	want := map[string]float64{"aima_queue_depth": 0, "aima_queue_running": 0}
	if diff := gocmp.Diff(want, pick(samples, "aima_queue_depth", "aima_queue_running")); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}

func TestObservations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		observe func(m *Metrics)
		want    map[string]float64
	}{
		{
			name: "requests by endpoint and status",
			observe: func(m *Metrics) {
				m.Request("/v1/chat/completions", 200, 1500*time.Millisecond)
				m.Request("/v1/chat/completions", 200, 20*time.Millisecond)
				m.Request("/v1/chat/completions", 429, time.Millisecond)
				m.Request("/health", 200, -time.Millisecond) // clock step: counts as 0
			},
			want: map[string]float64{
				`aima_requests_total{endpoint="/v1/chat/completions",status="200"}`:                2,
				`aima_requests_total{endpoint="/v1/chat/completions",status="429"}`:                1,
				`aima_requests_total{endpoint="/health",status="200"}`:                             1,
				`aima_request_duration_seconds_count{endpoint="/v1/chat/completions"}`:             3,
				`aima_request_duration_seconds_sum{endpoint="/v1/chat/completions"}`:               1.521,
				`aima_request_duration_seconds_bucket{endpoint="/v1/chat/completions",le="0.005"}`: 1,
				`aima_request_duration_seconds_bucket{endpoint="/v1/chat/completions",le="0.025"}`: 2,
				`aima_request_duration_seconds_bucket{endpoint="/v1/chat/completions",le="1"}`:     2,
				`aima_request_duration_seconds_bucket{endpoint="/v1/chat/completions",le="2.5"}`:   3,
				`aima_request_duration_seconds_bucket{endpoint="/v1/chat/completions",le="+Inf"}`:  3,
				`aima_request_duration_seconds_bucket{endpoint="/health",le="0.005"}`:              1,
				`aima_request_duration_seconds_sum{endpoint="/health"}`:                            0,
			},
		},
		{
			name: "queue wait and ttft",
			observe: func(m *Metrics) {
				m.QueueWait(0)
				m.QueueWait(2 * time.Second)
				m.TTFT(250 * time.Millisecond) // on a bound: counted in it
				m.TTFT(10 * time.Minute)
			},
			want: map[string]float64{
				`aima_queue_wait_seconds_count`:              2,
				`aima_queue_wait_seconds_sum`:                2,
				`aima_queue_wait_seconds_bucket{le="0.001"}`: 1,
				`aima_queue_wait_seconds_bucket{le="1"}`:     1,
				`aima_queue_wait_seconds_bucket{le="2.5"}`:   2,
				`aima_ttft_seconds_count`:                    2,
				`aima_ttft_seconds_sum`:                      600.25,
				`aima_ttft_seconds_bucket{le="0.1"}`:         0,
				`aima_ttft_seconds_bucket{le="0.25"}`:        1,
				`aima_ttft_seconds_bucket{le="120"}`:         1,
				`aima_ttft_seconds_bucket{le="+Inf"}`:        2,
			},
		},
		{
			name: "tokens",
			observe: func(m *Metrics) {
				m.Tokens(100, 20)
				m.Tokens(5, 0)
				m.Tokens(1234567, 0)
				m.Tokens(-1, -1) // ignored
			},
			want: map[string]float64{
				"aima_prompt_tokens_total":     1234672,
				"aima_completion_tokens_total": 20,
			},
		},
		{
			name: "decode rate",
			observe: func(m *Metrics) {
				m.DecodeRate(42.5)
				m.DecodeRate(180)
				m.DecodeRate(-3)
			},
			want: map[string]float64{
				`aima_decode_tokens_per_second_count`:            2,
				`aima_decode_tokens_per_second_sum`:              222.5,
				`aima_decode_tokens_per_second_bucket{le="40"}`:  0,
				`aima_decode_tokens_per_second_bucket{le="50"}`:  1,
				`aima_decode_tokens_per_second_bucket{le="200"}`: 2,
			},
		},
		{
			name: "prefix cache",
			observe: func(m *Metrics) {
				m.PrefixCache(true)
				m.PrefixCache(false)
				m.PrefixCache(false)
			},
			want: map[string]float64{
				"aima_prefix_cache_hits_total":   1,
				"aima_prefix_cache_misses_total": 2,
			},
		},
		{
			name: "ttft parts",
			observe: func(m *Metrics) {
				m.TTFTPart("read", 3*time.Millisecond)
				m.TTFTPart("restore", 400*time.Microsecond)
				m.TTFTPart("read", 2*time.Millisecond)
			},
			want: map[string]float64{
				`aima_ttft_part_seconds_count{part="read"}`:                 2,
				`aima_ttft_part_seconds_sum{part="read"}`:                   0.005,
				`aima_ttft_part_seconds_bucket{part="read",le="0.0025"}`:    1,
				`aima_ttft_part_seconds_bucket{part="read",le="0.005"}`:     2,
				`aima_ttft_part_seconds_count{part="restore"}`:              1,
				`aima_ttft_part_seconds_bucket{part="restore",le="0.0005"}`: 1,
			},
		},
		{
			name: "restores by tier",
			observe: func(m *Metrics) {
				m.Restore("device", 63<<20, 2700<<20)
				m.Restore("device", 2763<<20, 0)
				m.Restore("host", 63<<20, -1)
			},
			want: map[string]float64{
				`aima_prefix_cache_restores_total{tier="device"}`:             2,
				`aima_prefix_cache_restores_total{tier="host"}`:               1,
				`aima_prefix_cache_restored_bytes_total{how="copied_device"}`: 2826 << 20,
				`aima_prefix_cache_restored_bytes_total{how="copied_host"}`:   63 << 20,
				`aima_prefix_cache_restored_bytes_total{how="adopted"}`:       2700 << 20,
			},
		},
		{
			name: "label values are escaped",
			observe: func(m *Metrics) {
				m.Request("a\"b\\c\nd", 500, 0)
			},
			want: map[string]float64{
				`aima_requests_total{endpoint="a\"b\\c\nd",status="500"}`: 1,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(nil)
			tc.observe(m)
			samples, _ := scrape(t, m)
			keys := make([]string, 0, len(tc.want))
			for k := range tc.want {
				keys = append(keys, k)
			}
			got := pick(samples, keys...)
			if diff := gocmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNonFiniteDecodeRate(t *testing.T) {
	m := New(nil)
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		m.DecodeRate(v)
	}
	samples, _ := scrape(t, m)
	if got := samples["aima_decode_tokens_per_second_count"]; got != 0 {
		t.Errorf("count = %g, want 0", got)
	}
}

func TestPrivateRegistries(t *testing.T) {
	a, b := New(nil), New(nil)
	a.Tokens(7, 0)
	sa, _ := scrape(t, a)
	sb, _ := scrape(t, b)
	if diff := gocmp.Diff([]float64{7, 0}, []float64{sa["aima_prompt_tokens_total"], sb["aima_prompt_tokens_total"]}); diff != "" {
		t.Errorf("prompt tokens of two instances (-want +got):\n%s", diff)
	}
}

func TestExactHistogramText(t *testing.T) {
	var e expo
	h := newHistogram([]float64{0.5, 1})
	h.observe(0.25)
	h.observe(1)
	h.observe(3)
	e.header("x_seconds", "histogram", "A help\\text\nwith a newline.")
	e.histogram("x_seconds", []string{"endpoint", "/v1"}, h)
	want := `# HELP x_seconds A help\\text\nwith a newline.
# TYPE x_seconds histogram
x_seconds_bucket{endpoint="/v1",le="0.5"} 1
x_seconds_bucket{endpoint="/v1",le="1"} 2
x_seconds_bucket{endpoint="/v1",le="+Inf"} 3
x_seconds_sum{endpoint="/v1"} 4.25
x_seconds_count{endpoint="/v1"} 3
`
	if diff := gocmp.Diff(want, e.buf.String()); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}
}

func TestConcurrentUse(t *testing.T) {
	var waiting int
	var qmu sync.Mutex
	m := New(func() (int, int) {
		qmu.Lock()
		defer qmu.Unlock()
		return waiting, 1
	})
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				m.Request(fmt.Sprintf("/e%d", w%3), 200+i%2, time.Millisecond)
				m.QueueWait(time.Millisecond)
				m.TTFT(time.Millisecond)
				m.Tokens(1, 2)
				m.DecodeRate(50)
				m.PrefixCache(i%2 == 0)
				qmu.Lock()
				waiting = i
				qmu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		}
	})
	wg.Wait()
	samples, _ := scrape(t, m)
	want := map[string]float64{
		"aima_prompt_tokens_total":            workers * each,
		"aima_completion_tokens_total":        2 * workers * each,
		"aima_prefix_cache_hits_total":        workers * each / 2,
		"aima_prefix_cache_misses_total":      workers * each / 2,
		"aima_decode_tokens_per_second_count": workers * each,
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	if diff := gocmp.Diff(want, pick(samples, keys...)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	var requests float64
	for k, v := range samples {
		if strings.HasPrefix(k, "aima_requests_total{") {
			requests += v
		}
	}
	if requests != workers*each {
		t.Errorf("requests total %g, want %d", requests, workers*each)
	}
}

func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1234567, "1234567"},
		{0.005, "0.005"},
		{2.5, "2.5"},
		{1e300, "1e+300"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
		{math.NaN(), "NaN"},
	} {
		if diff := gocmp.Diff(tc.want, formatFloat(tc.v)); diff != "" {
			t.Errorf("formatFloat(%g) (-want +got):\n%s", tc.v, diff)
		}
	}
}
