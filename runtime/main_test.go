package runtime_test

import (
	"os"
	"testing"
)

// sharedTemp holds files the package's tests share (the tiny checkpoint).
var sharedTemp string

func makeTemp() (string, error) {
	if sharedTemp == "" {
		dir, err := os.MkdirTemp("", "runtime-test-")
		if err != nil {
			return "", err
		}
		sharedTemp = dir
	}
	return sharedTemp, nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedTemp != "" {
		os.RemoveAll(sharedTemp)
	}
	os.Exit(code)
}
