package gpu

import "testing"

// FakeBackend is a backend on a fake driver of dialect, for the tests of
// package gputest's checks against it.
func FakeBackend(t *testing.T, dialect string) *Backend {
	b, _ := open(t, dialect, nil)
	return b
}
