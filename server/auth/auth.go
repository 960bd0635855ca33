// Package auth guards the server with a single API key.
//
// The key is read from a file that only its owner may read (LoadKeyFile),
// checked on every request as "Authorization: Bearer KEY" in constant time
// (Middleware), and required before the server listens on anything but a
// loopback address (CheckBind).
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"unicode"
)

// maxKeyFileSize bounds what LoadKeyFile reads, so that pointing it at a
// large file fails instead of holding the file in memory.
const maxKeyFileSize = 4096

// LoadKeyFile returns the API key stored in path, so that the key never
// appears on a command line. It refuses a file that group or others may
// access (mode & 0o077 != 0), naming the file and its mode; it trims
// surrounding whitespace and refuses an empty key or one with whitespace
// inside.
func LoadKeyFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("api key file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("api key file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("api key file %s is not a regular file (mode %s)", path, info.Mode())
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("api key file %s has mode %04o: it must not be accessible to group or others (chmod 600 %s)",
			path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return "", fmt.Errorf("api key file %s: %w", path, err)
	}
	if len(data) > maxKeyFileSize {
		return "", fmt.Errorf("api key file %s is larger than %d bytes", path, maxKeyFileSize)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		return "", fmt.Errorf("api key file %s holds no key", path)
	}
	if strings.ContainsFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return "", fmt.Errorf("api key file %s: the key contains whitespace or control characters", path)
	}
	return key, nil
}

// errorBody is the OpenAI error shape written on a 401.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// Middleware rejects requests that do not carry "Authorization: Bearer KEY",
// so that only holders of the key reach the model. The comparison takes the
// same time whatever the presented key. A rejected request gets 401 with
// "WWW-Authenticate: Bearer" and an OpenAI authentication_error body. An
// empty key disables the check; requests whose URL path is one of open (for
// example "/health") pass without a key.
func Middleware(key string, open ...string) func(http.Handler) http.Handler {
	if key == "" {
		return func(next http.Handler) http.Handler { return next }
	}
	want := sha256.Sum256([]byte(key))
	openPaths := make(map[string]bool, len(open))
	for _, p := range open {
		openPaths[p] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if openPaths[r.URL.Path] {
				next.ServeHTTP(w, r)
				return
			}
			presented, ok := bearerToken(r.Header.Get("Authorization"))
			if !ok {
				unauthorized(w, "Missing API key: send it in the Authorization header as \"Bearer KEY\".")
				return
			}
			// Hashing first makes the comparison independent of the
			// presented key's length as well as its content.
			got := sha256.Sum256([]byte(presented))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				unauthorized(w, "Incorrect API key provided.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// bearerToken extracts the credentials of a Bearer Authorization header;
// the scheme is case-insensitive (RFC 9110 section 11.1).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// unauthorized writes the 401 answer in the shape OpenAI clients parse.
func unauthorized(w http.ResponseWriter, message string) {
	var body errorBody
	body.Error.Message = message
	body.Error.Type = "authentication_error"
	body.Error.Code = "invalid_api_key"
	data, err := json.Marshal(body)
	if err != nil {
		panic(err) // a fixed struct of strings always marshals
	}
	h := w.Header()
	h.Set("WWW-Authenticate", "Bearer")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(append(data, '\n'))
}

// IsLoopback reports whether a listen host only accepts local connections,
// which is what lets the server run without a key: 127.0.0.0/8, ::1 (also
// bracketed, zoned or IPv4-mapped) and "localhost". The empty host and the
// unspecified addresses 0.0.0.0 and :: listen on every interface and are not
// loopback; other names are not resolved and count as not loopback.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, "localhost.") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return addr.Unmap().IsLoopback()
}

// ErrUnauthenticatedBind is wrapped by CheckBind's error, so that callers can
// recognise the refusal.
var ErrUnauthenticatedBind = errors.New("refusing a non-loopback listen address without an API key")

// CheckBind enforces the bind rule, so that the model is never exposed to
// the network by accident: a host that is not loopback needs a key unless
// allowUnauthenticated says the exposure is deliberate.
func CheckBind(host string, hasKey, allowUnauthenticated bool) error {
	if IsLoopback(host) || hasKey || allowUnauthenticated {
		return nil
	}
	shown := fmt.Sprintf("%q", host)
	if host == "" {
		shown = `"" (all interfaces)`
	}
	return fmt.Errorf("%w: host %s; pass --api-key-file, or --allow-unauthenticated to serve without one",
		ErrUnauthenticatedBind, shown)
}
