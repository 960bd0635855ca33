package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listen opens a datagram socket named name (a path, or "@abstract") that
// stands in for systemd.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %q: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// receive reads one datagram, or returns "" when none arrives in time.
func receive(t *testing.T, conn *net.UnixConn, wait time.Duration) string {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return ""
		}
		t.Fatalf("read: %v", err)
	}
	return string(buf[:n])
}

// shortDir returns a temporary directory whose paths fit a sockaddr_un (108
// bytes), which a deeply named t.TempDir may not.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestNotify(t *testing.T) {
	type result struct {
		Sent     bool
		Err      bool
		Received string
	}
	for _, tc := range []struct {
		name     string
		abstract bool
		env      func(sock string) string // NOTIFY_SOCKET from the listening socket's name
		state    string
		want     result
	}{
		{name: "unset", env: func(string) string { return "" }, state: "READY=1", want: result{}},
		{name: "ready", env: func(s string) string { return s }, state: "READY=1",
			want: result{Sent: true, Received: "READY=1"}},
		{name: "stopping", env: func(s string) string { return s }, state: "STOPPING=1",
			want: result{Sent: true, Received: "STOPPING=1"}},
		{name: "several assignments", env: func(s string) string { return s }, state: "READY=1\nSTATUS=serving",
			want: result{Sent: true, Received: "READY=1\nSTATUS=serving"}},
		{name: "abstract", abstract: true, env: func(s string) string { return s }, state: "READY=1",
			want: result{Sent: true, Received: "READY=1"}},
		{name: "no listener", env: func(s string) string { return s + ".missing" }, state: "READY=1",
			want: result{Err: true}},
		{name: "relative path", env: func(string) string { return "notify.sock" }, state: "READY=1",
			want: result{Err: true}},
		{name: "vsock", env: func(string) string { return "vsock:2:1234" }, state: "READY=1",
			want: result{Err: true}},
		{name: "empty state", env: func(s string) string { return s }, state: "",
			want: result{Err: true}},
	} {
		if tc.abstract && runtime.GOOS != "linux" {
			continue // abstract sockets exist on Linux only
		}
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(shortDir(t), "notify.sock")
			if tc.abstract {
				sock = fmt.Sprintf("@aimac-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
			}
			conn := listen(t, sock)
			t.Setenv(Socket, tc.env(sock))

			sent, err := Notify(tc.state)
			got := result{Sent: sent, Err: err != nil}
			wait := time.Second
			if !sent {
				wait = 20 * time.Millisecond
			}
			got.Received = receive(t, conn, wait)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Notify(%q) with %s=%q (-want +got):\n%s (err %v)", tc.state, Socket, tc.env(sock), diff, err)
			}
		})
	}
}
