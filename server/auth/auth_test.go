package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadKeyFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
		wantErr []string // substrings of the error; nil means success
	}{
		{name: "owner only", content: "sk-local-123\n", mode: 0o600, want: "sk-local-123"},
		{name: "read only", content: "sk-local-123", mode: 0o400, want: "sk-local-123"},
		{name: "owner rwx", content: "k", mode: 0o700, want: "k"},
		{name: "surrounding whitespace", content: " \t sk-x \r\n\n", mode: 0o600, want: "sk-x"},
		{name: "group readable", content: "k", mode: 0o640, wantErr: []string{"key", "0640"}},
		{name: "world readable", content: "k", mode: 0o604, wantErr: []string{"0604"}},
		{name: "group writable", content: "k", mode: 0o620, wantErr: []string{"0620"}},
		{name: "empty", content: "", mode: 0o600, wantErr: []string{"no key"}},
		{name: "blank lines", content: "\n \n", mode: 0o600, wantErr: []string{"no key"}},
		{name: "two words", content: "sk one\n", mode: 0o600, wantErr: []string{"whitespace"}},
		{name: "two lines", content: "sk-one\nsk-two\n", mode: 0o600, wantErr: []string{"whitespace"}},
		{name: "too large", content: strings.Repeat("k", maxKeyFileSize+1), mode: 0o600, wantErr: []string{"larger"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := LoadKeyFile(path)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("LoadKeyFile: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("key (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadKeyFile = %q, want an error", got)
			}
			for _, s := range append([]string{path}, tc.wantErr...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestLoadKeyFileNotAFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(dir); err == nil || !strings.Contains(err.Error(), "regular file") {
		t.Errorf("LoadKeyFile(directory) error = %v, want a regular-file error", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := LoadKeyFile(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadKeyFile(missing) error = %v, want ErrNotExist", err)
	}

	// A symlink is judged by the file it points to.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("sk-link"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadKeyFile(link); err != nil || got != "sk-link" {
		t.Errorf("LoadKeyFile(link) = %q, %v; want sk-link", got, err)
	}
}

func TestMiddleware(t *testing.T) {
	const key = "sk-test-key"
	unauthorized := func(message string) map[string]any {
		return map[string]any{"error": map[string]any{
			"message": message,
			"type":    "authentication_error",
			"param":   nil,
			"code":    "invalid_api_key",
		}}
	}
	missing := unauthorized("Missing API key: send it in the Authorization header as \"Bearer KEY\".")
	wrong := unauthorized("Incorrect API key provided.")

	for _, tc := range []struct {
		name     string
		key      string
		open     []string
		path     string
		header   string
		wantCode int
		wantBody map[string]any // for 401 only
	}{
		{name: "right key", key: key, path: "/v1/models", header: "Bearer " + key, wantCode: 200},
		{name: "scheme case", key: key, path: "/v1/models", header: "bearer " + key, wantCode: 200},
		{name: "extra spaces", key: key, path: "/v1/models", header: "  Bearer   " + key + " ", wantCode: 200},
		{name: "no header", key: key, path: "/v1/models", wantCode: 401, wantBody: missing},
		{name: "empty token", key: key, path: "/v1/models", header: "Bearer ", wantCode: 401, wantBody: missing},
		{name: "scheme only", key: key, path: "/v1/models", header: "Bearer", wantCode: 401, wantBody: missing},
		{name: "basic scheme", key: key, path: "/v1/models", header: "Basic " + key, wantCode: 401, wantBody: missing},
		{name: "bare key", key: key, path: "/v1/models", header: key, wantCode: 401, wantBody: missing},
		{name: "wrong key", key: key, path: "/v1/models", header: "Bearer sk-other", wantCode: 401, wantBody: wrong},
		{name: "key prefix", key: key, path: "/v1/models", header: "Bearer sk-test", wantCode: 401, wantBody: wrong},
		{name: "key extended", key: key, path: "/v1/models", header: "Bearer " + key + "x", wantCode: 401, wantBody: wrong},
		{name: "open path", key: key, open: []string{"/health", "/ready"}, path: "/ready", wantCode: 200},
		{name: "open path is exact", key: key, open: []string{"/health"}, path: "/health/x", wantCode: 401, wantBody: missing},
		{name: "no key configured", key: "", path: "/v1/models", wantCode: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
			})
			h := Middleware(tc.key, tc.open...)(next)
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tc.wantCode {
				t.Fatalf("status = %d, want %d", rec.Code, tc.wantCode)
			}
			if tc.wantCode != http.StatusUnauthorized {
				return
			}
			gotHeaders := map[string]string{
				"WWW-Authenticate": rec.Header().Get("WWW-Authenticate"),
				"Content-Type":     rec.Header().Get("Content-Type"),
			}
			wantHeaders := map[string]string{"WWW-Authenticate": "Bearer", "Content-Type": "application/json"}
			if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if diff := cmp.Diff(tc.wantBody, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if strings.Contains(rec.Body.String(), "sk-") {
				t.Errorf("body echoes a key: %s", rec.Body)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"[::1]", true},
		{"::ffff:127.0.0.1", true},
		{"localhost", true},
		{"LOCALHOST", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"[::]", false},
		{"192.168.1.10", false},
		{"10.0.0.1", false},
		{"fe80::1", false},
		{"128.0.0.1", false},
		{"example.com", false},
		{"localhost.example.com", false},
	} {
		t.Run(tc.host, func(t *testing.T) {
			if got := IsLoopback(tc.host); got != tc.want {
				t.Errorf("IsLoopback(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

func TestCheckBind(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		host                 string
		hasKey, allowUnauthd bool
		wantErr              bool
	}{
		{name: "loopback without key", host: "127.0.0.1"},
		{name: "localhost without key", host: "localhost"},
		{name: "loopback v6 without key", host: "::1"},
		{name: "all interfaces without key", host: "0.0.0.0", wantErr: true},
		{name: "empty host without key", host: "", wantErr: true},
		{name: "lan address without key", host: "192.168.1.10", wantErr: true},
		{name: "all interfaces with key", host: "0.0.0.0", hasKey: true},
		{name: "all interfaces allowed", host: "0.0.0.0", allowUnauthd: true},
		{name: "v6 any with both", host: "::", hasKey: true, allowUnauthd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBind(tc.host, tc.hasKey, tc.allowUnauthd)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("CheckBind: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnauthenticatedBind) {
				t.Fatalf("CheckBind error = %v, want ErrUnauthenticatedBind", err)
			}
			for _, s := range []string{"--api-key-file", "--allow-unauthenticated"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %s", err, s)
				}
			}
		})
	}
}
