package output

import "strings"

// stopMatcher finds the request's stop strings in the content stream, holding
// back a tail that may be the start of one.
type stopMatcher struct {
	stops []string
	held  string
}

// newStopMatcher ignores empty stop strings, which would match everywhere.
func newStopMatcher(stops []string) stopMatcher {
	var m stopMatcher
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, s)
		}
	}
	return m
}

// write takes the next content text and returns what can be emitted; hit
// reports a match, in which case the match and all after it are dropped. The
// match that ends first wins (then the longest), which is what a stream cut
// anywhere sees first, so the result does not depend on the cuts.
func (m *stopMatcher) write(s string) (out string, hit bool) {
	if len(m.stops) == 0 {
		return s, false
	}
	t := m.held + s
	m.held = ""
	start, end := -1, 0
	for _, stop := range m.stops {
		i := strings.Index(t, stop)
		if i < 0 {
			continue
		}
		if e := i + len(stop); start < 0 || e < end || e == end && i < start {
			start, end = i, e
		}
	}
	if start >= 0 {
		return t[:start], true
	}
	h := 0
	for _, stop := range m.stops {
		h = max(h, partialSuffix(t, stop))
	}
	m.held = t[len(t)-h:]
	return t[:len(t)-h], false
}

// flush returns the held tail once the content run has ended without a match.
func (m *stopMatcher) flush() string {
	s := m.held
	m.held = ""
	return s
}
