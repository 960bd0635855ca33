package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// unit is a systemd unit file: its sections, each key's values in order.
type unit map[string]map[string][]string

// parseUnit reads a unit file as systemd does: [Section] headers, Key=Value
// lines, comments (# and ;) and backslash continuations; anything else is
// an error naming the line.
func parseUnit(path string) (unit, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	n := 0
	key := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		for strings.HasSuffix(line, `\`) && sc.Scan() {
			n++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(sc.Text())
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") {
				return nil, fmt.Errorf("%s:%d: bad section header %q", path, n, line)
			}
			section = line[1 : len(line)-1]
			if u[section] != nil {
				return nil, fmt.Errorf("%s:%d: section [%s] again", path, n, section)
			}
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok || !key.MatchString(k) {
				return nil, fmt.Errorf("%s:%d: not Key=Value: %q", path, n, line)
			}
			if section == "" {
				return nil, fmt.Errorf("%s:%d: %s outside a section", path, n, k)
			}
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u, sc.Err()
}

// TestUnitFile: packaging/aima-engine.service parses as a unit, is a
// hardened Type=notify service, and its ExecStart runs `aima-engine serve`
// with flags serve has, fed by variables the unit or its environment file
// defines.
func TestUnitFile(t *testing.T) {
	dir := filepath.Join("..", "..", "packaging")
	u, err := parseUnit(filepath.Join(dir, "aima-engine.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Unit", "Service", "Install"} {
		if u[s] == nil {
			t.Fatalf("no [%s] section", s)
		}
	}
	svc := u["Service"]
	one := func(k string) string {
		if len(svc[k]) != 1 {
			t.Errorf("%s: %d values, want one", k, len(svc[k]))
			return ""
		}
		return svc[k][0]
	}
	for k, want := range map[string]string{
		"Type": "notify", "DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"DevicePolicy": "closed", "SystemCallFilter": "@system-service", "ReadOnlyPaths": "/srv/aima-engine", "EnvironmentFile": "/etc/aima-engine/aima-engine.env",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
	if _, set := svc["MemoryDenyWriteExecute"]; set {
		t.Error("MemoryDenyWriteExecute is set: the GPU drivers need writable executable memory")
	}
	if want := []string{"char-nvidia* rw", "char-kfd rw", "char-drm rw"}; !slices.Equal(svc["DeviceAllow"], want) {
		t.Errorf("DeviceAllow %q, want %q", svc["DeviceAllow"], want)
	}

	args := strings.Fields(one("ExecStart"))
	if len(args) < 2 || filepath.Base(args[0]) != "aima-engine" || args[1] != "serve" {
		t.Fatalf("ExecStart %q does not run aima-engine serve", args)
	}
	flags := serveCmd().Flags()
	defined := map[string]bool{"CREDENTIALS_DIRECTORY": true} // set by systemd for LoadCredential=
	for _, env := range svc["Environment"] {
		for _, kv := range strings.Fields(env) {
			k, _, _ := strings.Cut(kv, "=")
			defined[k] = true
		}
	}
	envFile, err := os.ReadFile(filepath.Join(dir, "aima-engine.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(envFile), "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			defined[k] = true
		}
	}
	if !defined["AIMA_MODEL_DIR"] {
		t.Error("the environment file does not set AIMA_MODEL_DIR")
	}
	variable := regexp.MustCompile(`\$\{?([A-Z_]+)\}?`)
	for _, a := range args[2:] {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if flags.Lookup(name) == nil {
				t.Errorf("ExecStart passes --%s, which serve does not have", name)
			}
		}
		for _, m := range variable.FindAllStringSubmatch(a, -1) {
			if !defined[m[1]] {
				t.Errorf("ExecStart uses $%s, which neither the unit nor aima-engine.env defines", m[1])
			}
		}
	}
	if key := one("LoadCredential"); !strings.HasPrefix(key, "api-key:") || !slices.Contains(args, "${CREDENTIALS_DIRECTORY}/api-key") {
		t.Errorf("the API key: LoadCredential=%q, ExecStart %q", key, args)
	}
	if got := u["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("WantedBy %q", got)
	}
}

func TestParseUnitErrors(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"Type=notify\n", "outside a section"},
		{"[Service\n", "bad section header"},
		{"[Service]\njust words\n", "not Key=Value"},
		{"[Service]\n[Service]\n", "section [Service] again"},
	} {
		path := filepath.Join(t.TempDir(), "x.service")
		if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parseUnit(path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.text, err, tt.want)
		}
	}
}
