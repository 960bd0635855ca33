// Package sdnotify tells systemd about the server's lifecycle (sd_notify):
// "READY=1" once the model is loaded and the server listens, "STOPPING=1"
// when a shutdown begins. It speaks the datagram protocol directly, so the
// binary needs no libsystemd.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// Socket names the environment variable in which systemd passes the
// notification socket to a Type=notify service.
const Socket = "NOTIFY_SOCKET"

// Notify sends state (for example "READY=1" or "STOPPING=1"; several
// assignments may be joined by newlines) to the socket named by
// $NOTIFY_SOCKET, so that systemd orders dependent units after readiness and
// knows a stop is under way. It returns false and no error when the variable
// is unset or empty, which is the case outside systemd. The socket is a path
// or, with a leading "@", a Linux abstract socket name.
func Notify(state string) (bool, error) {
	name := os.Getenv(Socket)
	if name == "" {
		return false, nil
	}
	if state == "" {
		return false, errors.New("sdnotify: empty state")
	}
	if !strings.HasPrefix(name, "/") && !strings.HasPrefix(name, "@") {
		// systemd also offers vsock: addresses for virtual machines.
		return false, fmt.Errorf("sdnotify: unsupported %s address %q", Socket, name)
	}
	// Go's unix sockaddr turns a leading "@" into the abstract namespace's
	// leading NUL byte.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	return true, nil
}
