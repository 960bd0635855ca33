// Package metrics collects the server's Prometheus metrics and serves them
// on /metrics in the Prometheus text exposition format (version 0.0.4).
//
// Every Metrics value is its own registry: nothing is registered globally,
// so tests and several servers in one process never collide. The package
// writes the exposition itself, which keeps the serving binary free of the
// client library's dependency tree; the series follow Prometheus naming
// (base units, _total counters, cumulative histogram buckets).
//
// Series:
//
//	aima_requests_total{endpoint,status}              counter
//	aima_request_duration_seconds{endpoint}           histogram
//	aima_queue_depth                                  gauge, requests waiting
//	aima_queue_running                                gauge, requests running
//	aima_queue_wait_seconds                           histogram
//	aima_ttft_seconds                                 histogram, time to first token
//	aima_ttft_part_seconds{part}                      histogram, its parts (read … first)
//	aima_decode_tokens_per_second                     histogram
//	aima_prompt_tokens_total                          counter
//	aima_completion_tokens_total                      counter
//	aima_prefix_cache_hits_total                      counter
//	aima_prefix_cache_misses_total                    counter
//	aima_prefix_cache_evictions_total                 counter
//	aima_prefix_cache_entries                         gauge
//	aima_prefix_cache_bytes                           gauge
//	aima_prefix_cache_device_bytes                    gauge
//	aima_prefix_cache_restores_total{tier}            counter, hits restored from device or host memory
//	aima_prefix_cache_restored_bytes_total{how}       counter, bytes copied from each tier, or adopted
package metrics

import (
	"bytes"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ContentType is the media type of the text exposition format.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Histogram bucket upper bounds. Requests span milliseconds (tokenize) to
// minutes (a long generation); decode rates on one GPU span a few to a few
// hundred tokens per second.
var (
	durationBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	queueWaitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	ttftBuckets      = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120}
	// A part of a cache hit's TTFT is a fraction of a millisecond to tens.
	partBuckets       = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 120}
	decodeRateBuckets = []float64{1, 2, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 125, 150, 200, 300, 500}
)

// requestKey labels one aima_requests_total series.
type requestKey struct {
	endpoint string
	status   int
}

// Metrics holds the server's metrics. It is safe for concurrent use.
type Metrics struct {
	queueStats func() (waiting, running int)

	mu               sync.Mutex
	requests         map[requestKey]uint64
	durations        map[string]*histogram
	queueWait        *histogram
	ttft             *histogram
	ttftParts        map[string]*histogram
	partOrder        []string // the parts in the order first recorded
	restores         map[string]uint64
	restoredBytes    map[string]uint64
	decodeRate       *histogram
	promptTokens     uint64
	completionTokens uint64
	cacheHits        uint64
	cacheMisses      uint64
	cacheStats       func() (entries int, bytes, deviceBytes int64, evictions uint64)
}

// SetPrefixCacheStats reports the prefix cache's size (host and device
// bytes) and evictions at every scrape.
func (m *Metrics) SetPrefixCacheStats(f func() (entries int, bytes, deviceBytes int64, evictions uint64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cacheStats = f
}

// New returns an empty set of metrics. queueStats is called at every scrape
// for the queue gauges, so they are never stale; nil reports an empty queue.
func New(queueStats func() (waiting, running int)) *Metrics {
	return &Metrics{
		queueStats: queueStats,
		requests:   make(map[requestKey]uint64),
		durations:  make(map[string]*histogram),
		queueWait:  newHistogram(queueWaitBuckets),
		ttft:       newHistogram(ttftBuckets),
		ttftParts:  make(map[string]*histogram),
		// Both tiers from the start: a rate over a series that appears
		// only with its first hit misses that hit.
		restores:      map[string]uint64{"device": 0, "host": 0},
		restoredBytes: map[string]uint64{"copied_device": 0, "copied_host": 0, "adopted": 0},
		decodeRate:    newHistogram(decodeRateBuckets),
	}
}

// Request records one finished request, so that errors and latency can be
// followed per endpoint. endpoint should be a route pattern (such as
// "/v1/chat/completions"), not a raw path, to keep the series few.
func (m *Metrics) Request(endpoint string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestKey{endpoint, status}]++
	h := m.durations[endpoint]
	if h == nil {
		h = newHistogram(durationBuckets)
		m.durations[endpoint] = h
	}
	h.observe(seconds(d))
}

// QueueWait records how long a request waited for the worker, the cost of
// batch-one scheduling under load.
func (m *Metrics) QueueWait(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queueWait.observe(seconds(d))
}

// TTFT records the time from a request's arrival to its first generated
// token, the latency a streaming user feels.
func (m *Metrics) TTFT(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ttft.observe(seconds(d))
}

// TTFTPart records one part of a request's time to first token (the
// server passes them in the order the request meets them).
func (m *Metrics) TTFTPart(part string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.ttftParts[part]
	if h == nil {
		h = newHistogram(partBuckets)
		m.ttftParts[part] = h
		m.partOrder = append(m.partOrder, part)
	}
	h.observe(seconds(d))
}

// Restore records a prefix-cache hit's restore: the tier it came from,
// the bytes it copied and the KV bytes the engine already held (adopted).
func (m *Metrics) Restore(tier string, copied, adopted int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.restores[tier]++
	m.restoredBytes["copied_"+tier] += uint64(max(copied, 0))
	m.restoredBytes["adopted"] += uint64(max(adopted, 0))
}

// Tokens adds one request's prompt and completion token counts, the
// throughput in and out; negative counts are ignored.
func (m *Metrics) Tokens(prompt, completion int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prompt > 0 {
		m.promptTokens += uint64(prompt)
	}
	if completion > 0 {
		m.completionTokens += uint64(completion)
	}
}

// DecodeRate records one request's decode speed in tokens per second, the
// engine's headline number; values that are not finite or are negative are
// ignored.
func (m *Metrics) DecodeRate(tokensPerSecond float64) {
	if math.IsNaN(tokensPerSecond) || math.IsInf(tokensPerSecond, 0) || tokensPerSecond < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decodeRate.observe(tokensPerSecond)
}

// PrefixCache records whether a request reused resident prompt state, so
// that the prefix cache's benefit can be measured.
func (m *Metrics) PrefixCache(hit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hit {
		m.cacheHits++
	} else {
		m.cacheMisses++
	}
}

// Handler serves the metrics in the text exposition format for Prometheus
// to scrape.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := m.render()
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// render writes every family, in a fixed order with sorted label values.
func (m *Metrics) render() []byte {
	waiting, running := 0, 0
	if m.queueStats != nil {
		waiting, running = m.queueStats()
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	var e expo

	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b requestKey) int {
		if c := strings.Compare(a.endpoint, b.endpoint); c != 0 {
			return c
		}
		return a.status - b.status
	})
	if len(keys) > 0 {
		e.header("aima_requests_total", "counter", "Finished HTTP requests by endpoint and status code.")
		for _, k := range keys {
			e.sample("aima_requests_total", []string{"endpoint", k.endpoint, "status", strconv.Itoa(k.status)},
				float64(m.requests[k]))
		}
	}

	endpoints := make([]string, 0, len(m.durations))
	for ep := range m.durations {
		endpoints = append(endpoints, ep)
	}
	slices.Sort(endpoints)
	if len(endpoints) > 0 {
		e.header("aima_request_duration_seconds", "histogram", "Time from a request's arrival to its last byte, by endpoint.")
		for _, ep := range endpoints {
			e.histogram("aima_request_duration_seconds", []string{"endpoint", ep}, m.durations[ep])
		}
	}

	e.header("aima_queue_depth", "gauge", "Requests admitted and waiting for the engine.")
	e.sample("aima_queue_depth", nil, float64(waiting))
	e.header("aima_queue_running", "gauge", "Requests running on the engine (0 or 1).")
	e.sample("aima_queue_running", nil, float64(running))

	e.header("aima_queue_wait_seconds", "histogram", "Time requests waited in the queue before running.")
	e.histogram("aima_queue_wait_seconds", nil, m.queueWait)
	e.header("aima_ttft_seconds", "histogram", "Time from a request's arrival to its first generated token.")
	e.histogram("aima_ttft_seconds", nil, m.ttft)
	if len(m.partOrder) > 0 {
		e.header("aima_ttft_part_seconds", "histogram", "Parts of the time to first token: read (body and JSON), prepare, queue, restore (prefix cache and engine state), prefill, snapshot, first (the first draw).")
		for _, part := range m.partOrder {
			e.histogram("aima_ttft_part_seconds", []string{"part", part}, m.ttftParts[part])
		}
	}
	e.header("aima_decode_tokens_per_second", "histogram", "Decode speed of each request in tokens per second.")
	e.histogram("aima_decode_tokens_per_second", nil, m.decodeRate)

	for _, c := range []struct {
		name, help string
		value      uint64
	}{
		{"aima_prompt_tokens_total", "Prompt tokens processed.", m.promptTokens},
		{"aima_completion_tokens_total", "Completion tokens generated.", m.completionTokens},
		{"aima_prefix_cache_hits_total", "Requests that reused cached prompt state.", m.cacheHits},
		{"aima_prefix_cache_misses_total", "Requests that found no cached prompt state.", m.cacheMisses},
	} {
		e.header(c.name, "counter", c.help)
		e.sample(c.name, nil, float64(c.value))
	}
	var entries int
	var bytes, deviceBytes int64
	var evictions uint64
	if m.cacheStats != nil {
		entries, bytes, deviceBytes, evictions = m.cacheStats()
	}
	e.header("aima_prefix_cache_restores_total", "counter", "Prefix cache hits by the tier their snapshot was restored from.")
	for _, tier := range sortedKeys(m.restores) {
		e.sample("aima_prefix_cache_restores_total", []string{"tier", tier}, float64(m.restores[tier]))
	}
	e.header("aima_prefix_cache_restored_bytes_total", "counter", "Bytes prefix cache hits copied into the engine, by tier, and KV bytes the engine already held (adopted, not copied).")
	for _, how := range sortedKeys(m.restoredBytes) {
		e.sample("aima_prefix_cache_restored_bytes_total", []string{"how", how}, float64(m.restoredBytes[how]))
	}
	e.header("aima_prefix_cache_evictions_total", "counter", "Prefix cache entries evicted to stay within its bounds.")
	e.sample("aima_prefix_cache_evictions_total", nil, float64(evictions))
	e.header("aima_prefix_cache_entries", "gauge", "Prefix cache entries held.")
	e.sample("aima_prefix_cache_entries", nil, float64(entries))
	e.header("aima_prefix_cache_bytes", "gauge", "Host bytes the prefix cache holds.")
	e.sample("aima_prefix_cache_bytes", nil, float64(bytes))
	e.header("aima_prefix_cache_device_bytes", "gauge", "Device bytes the prefix cache holds (snapshots kept in GPU memory).")
	e.sample("aima_prefix_cache_device_bytes", nil, float64(deviceBytes))
	return e.buf.Bytes()
}

// sortedKeys is a map's keys in order, for a stable exposition.
func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// seconds converts a duration for a histogram, treating a negative one (a
// clock step) as zero.
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}

// histogram counts observations into fixed buckets.
type histogram struct {
	bounds []float64 // upper bounds, ascending, without +Inf
	counts []uint64  // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

// newHistogram returns an empty histogram over bounds.
func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// observe adds v to the first bucket whose upper bound is at least v.
func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i]++
	h.sum += v
	h.count++
}

// expo accumulates text exposition output.
type expo struct{ buf bytes.Buffer }

// header writes a family's HELP and TYPE lines.
func (e *expo) header(name, typ, help string) {
	e.buf.WriteString("# HELP ")
	e.buf.WriteString(name)
	e.buf.WriteByte(' ')
	e.buf.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	e.buf.WriteString("\n# TYPE ")
	e.buf.WriteString(name)
	e.buf.WriteByte(' ')
	e.buf.WriteString(typ)
	e.buf.WriteByte('\n')
}

// sample writes one sample line; labels alternate names and values.
func (e *expo) sample(name string, labels []string, v float64) {
	e.buf.WriteString(name)
	if len(labels) > 0 {
		e.buf.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			e.buf.WriteString(labels[i])
			e.buf.WriteString(`="`)
			e.buf.WriteString(labelEscaper.Replace(labels[i+1]))
			e.buf.WriteByte('"')
		}
		e.buf.WriteByte('}')
	}
	e.buf.WriteByte(' ')
	e.buf.WriteString(formatFloat(v))
	e.buf.WriteByte('\n')
}

// histogram writes a histogram's cumulative buckets, sum and count.
func (e *expo) histogram(name string, labels []string, h *histogram) {
	var cum uint64
	for i, c := range h.counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = formatFloat(h.bounds[i])
		}
		e.sample(name+"_bucket", append(slices.Clip(labels), "le", le), float64(cum))
	}
	e.sample(name+"_sum", labels, h.sum)
	e.sample(name+"_count", labels, float64(h.count))
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// formatFloat writes a sample value or bucket bound in the text format;
// whole numbers below 2^53 (token counters) are written without an exponent.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
