package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/tokenizer"
)

// runIO runs the command with stdin and returns stdout and stderr.
func runIO(stdin string, args ...string) (string, string, error) {
	c := root()
	var out, errb bytes.Buffer
	c.SetIn(strings.NewReader(stdin))
	c.SetOut(&out)
	c.SetErr(&errb)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), errb.String(), err
}

func TestVersion(t *testing.T) {
	out, err := run("version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v versionReport
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v.Program != "aima-engine" || v.Module != "github.com/aimaproject/aimac" || v.Version == "" || v.Commit == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version %+v", v)
	}
	var names []string
	for _, tg := range v.Targets {
		names = append(names, tg.Name)
	}
	if diff := cmp.Diff([]string{"cpu", "sm_90", "gfx1151"}, names); diff != "" || !v.Targets[0].Available {
		t.Errorf("targets %+v (-want +got)\n%s", v.Targets, diff)
	}
	flag, err := run("--version")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := run("version")
	if !strings.HasPrefix(flag, "aima-engine "+v.Version+"\n") || flag != text {
		t.Errorf("--version printed %q, version %q", flag, text)
	}
	for _, want := range []string{"commit  " + v.Commit, "targets cpu via built in", "sm_90 via the CUDA driver", "gfx1151 via the HIP runtime"} {
		if !strings.Contains(flag, want) {
			t.Errorf("--version lacks %q:\n%s", want, flag)
		}
	}
	// Without a flag the root command prints its help.
	if help, err := run(); err != nil || !strings.Contains(help, "Available Commands") {
		t.Errorf("bare command: %v\n%s", err, help)
	}
}

// TestDoctor runs doctor on this machine's CPU: a good synthetic
// checkpoint passes (whatever GPU drivers the machine has: none here); a
// damaged one, a missing bundle and a busy port each fail, with a non-zero
// exit and the failing check named, in text and in JSON.
func TestDoctor(t *testing.T) {
	dir := tinyModel(t)
	out, err := run("doctor", "--model-dir", dir, "--context-tokens", "64", "--buckets", "16", "--port", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"gpu", "checkpoint", "sums", "memory", "port"}
	if len(lines) != len(want) {
		t.Fatalf("doctor printed %d lines:\n%s", len(lines), out)
	}
	for i, name := range want {
		if !strings.HasPrefix(lines[i], "ok   "+name+": ") {
			t.Errorf("line %d: %q, want ok %s", i, lines[i], name)
		}
	}

	js, err := run("doctor", "--model-dir", dir, "--context-tokens", "64", "--buckets", "16", "--port", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var checks []map[string]any
	if err := json.Unmarshal([]byte(js), &checks); err != nil || len(checks) != len(want) {
		t.Fatalf("--json: %v\n%s", err, js)
	}
	for i, c := range checks {
		if c["check"] != want[i] || c["ok"] != true || c["detail"] == "" || len(c) != 3 {
			t.Errorf("check %d: %v", i, c)
		}
	}

	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err := os.Truncate(shards[0], 10); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	out, err = run("doctor", "--model-dir", dir, "--bundle", filepath.Join(t.TempDir(), "none"), "--port", port, "--json")
	if err == nil || err.Error() != "4 of 6 checks failed" {
		t.Fatalf("error %v, want 4 of 6 checks failed\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, c := range checks {
		if c["ok"] == false {
			failed[c["check"].(string)] = c["detail"].(string)
		}
	}
	for name, has := range map[string]string{"checkpoint": filepath.Base(shards[0]), "bundle": "build one with `aimac build`", "memory": "not checked", "port": "127.0.0.1:" + port} {
		if !strings.Contains(failed[name], has) {
			t.Errorf("%s: %q, want a failure naming %q", name, failed[name], has)
		}
	}
	if _, err := run("doctor", "--bundle", dir, "--context-tokens", "64"); err == nil || !strings.Contains(err.Error(), "--context-tokens shapes a plan made now") {
		t.Errorf("--context-tokens with --bundle: %v", err)
	}
}

// TestVerify: a written manifest verifies; a flipped byte inside a shard
// fails naming it; the manifest is not overwritten.
func TestVerify(t *testing.T) {
	dir := tinyModel(t)
	if _, err := run("verify", "--model-dir", dir); err == nil || !strings.Contains(err.Error(), "no SHA256SUMS") {
		t.Errorf("no manifest: %v", err)
	}
	out, err := run("verify", "--model-dir", dir, "--write-manifest", "--jobs", "2")
	if err != nil || !strings.HasPrefix(out, "wrote "+filepath.Join(dir, "SHA256SUMS")+": ") {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err = run("verify", "--model-dir", dir); err != nil || !strings.Contains(out, "match SHA256SUMS") {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := run("verify", "--model-dir", dir, "--write-manifest"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second --write-manifest: %v", err)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	shard := shards[0]
	data, _ := os.ReadFile(shard)
	data[len(data)-3] ^= 0x80
	if err := os.WriteFile(shard, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run("verify", "--model-dir", dir)
	if err == nil || !regexp.MustCompile(regexp.QuoteMeta(filepath.Base(shard))+`: sha256 [0-9a-f]{64}, SHA256SUMS says [0-9a-f]{64} \(damaged or changed\)`).MatchString(err.Error()) {
		t.Errorf("flipped byte: %v", err)
	}
	if _, err := run("verify"); err == nil || err.Error() != "--model-dir is required" {
		t.Errorf("no --model-dir: %v", err)
	}
}

// TestServeHint: serving a directory without a manifest says how to write
// one (the load itself then fails here: the plan file does not exist).
func TestServeHint(t *testing.T) {
	dir := tinyModel(t)
	missing := filepath.Join(t.TempDir(), "plan.json")
	for _, manifest := range []bool{false, true} {
		if manifest {
			if _, err := run("verify", "--model-dir", dir, "--write-manifest"); err != nil {
				t.Fatal(err)
			}
		}
		_, stderr, err := runIO("", "serve", "--model-dir", dir, "--port", "0", "--plan", missing)
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("serve with a missing plan: %v", err)
		}
		if hint := strings.Contains(stderr, "aima-engine verify --model-dir DIR --write-manifest"); hint == manifest {
			t.Errorf("manifest %v: hint %v in\n%s", manifest, hint, stderr)
		}
	}
}

// TestChatTemplate: the rendered prompt of a request, from stdin and from
// a file, with thinking on and off, as text and as the ids that tokenize
// the text.
func TestChatTemplate(t *testing.T) {
	dir := tinyModel(t)
	req := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello!"}]}`
	out, errOut, err := runIO(req, "probe", "chat-template", "--model-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n"
	if out != want {
		t.Errorf("rendered (-want +got)\n%s", cmp.Diff(want, out))
	}
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tok.Encode(out)); errOut != strconv.Itoa(n)+" tokens\n" {
		t.Errorf("stderr %q, want %d tokens", errOut, n)
	}
	file := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(file, []byte(req), 0o644); err != nil {
		t.Fatal(err)
	}
	off, _, err := runIO("", "probe", "chat-template", "--model-dir", dir, "--request", file, "--enable-thinking=false")
	if err != nil || !strings.HasSuffix(off, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Errorf("thinking off: %v %q", err, off)
	}
	ids, _, err := runIO(req, "probe", "chat-template", "--model-dir", dir, "--ids")
	var got []int32
	if err != nil || json.Unmarshal([]byte(ids), &got) != nil {
		t.Fatalf("--ids: %v %q", err, ids)
	}
	if diff := cmp.Diff(tok.Encode(out), got); diff != "" {
		t.Errorf("--ids (-text's tokens +printed)\n%s", diff)
	}
	if _, _, err := runIO(`{"messages":[]}`, "probe", "chat-template", "--model-dir", dir); err == nil || !strings.Contains(err.Error(), "the request: 400") {
		t.Errorf("bad request: %v", err)
	}
}

// TestFlags: every value flag of every command shows a placeholder, every
// numeric one is bounded, and out-of-range values are refused naming the
// flag (they were once replaced by defaults).
func TestFlags(t *testing.T) {
	unbounded := map[string]string{
		"seed":           "every uint64 is a seed",
		"prefill":        "a list, checked by bench (0 drops a length)",
		"decode-context": "a list, checked by bench (0 drops a length)",
	}
	for _, p := range cliflag.Audit(root(), unbounded) {
		t.Error(p)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--queue-depth", "-1"}, `invalid argument "-1" for "--queue-depth" flag: want ≥ 1`},
		{[]string{"serve", "--drain-timeout", "-1s"}, `invalid argument "-1s" for "--drain-timeout" flag: want a positive duration`},
		{[]string{"serve", "--queue-timeout", "0"}, `"--queue-timeout" flag: want a positive duration, not 0`},
		{[]string{"serve", "--request-timeout", "-5m"}, `"--request-timeout" flag`},
		{[]string{"serve", "--max-body-bytes", "0"}, `"--max-body-bytes" flag: want ≥ 1`},
		{[]string{"serve", "--responses-store", "0"}, `"--responses-store" flag: want ≥ 1`},
		{[]string{"serve", "--prefix-cache-entries", "-1"}, `"--prefix-cache-entries" flag: want ≥ 0`},
		{[]string{"serve", "--prefix-cache-mib", "-1"}, `"--prefix-cache-mib" flag: want 0 to 8796093022207`},
		{[]string{"serve", "--port", "65536"}, `"--port" flag: want 0 to 65535`},
		{[]string{"serve", "--context-tokens", "0"}, `"--context-tokens" flag: want ≥ 1`},
		{[]string{"probe", "generate", "--model-dir", "x", "--tokens", "1", "--buckets", "16,0"}, `--buckets "16,0": 0 is not a positive size`},
		{[]string{"probe", "generate", "--max-tokens", "-1"}, `"--max-tokens" flag: want ≥ 0`},
		{[]string{"probe", "bench", "--time-limit", "-1s"}, `"--time-limit" flag: want a positive duration`},
		{[]string{"probe", "bench", "--id-limit", "-1"}, `"--id-limit" flag: want ≥ 0`},
		{[]string{"doctor", "--port", "-1"}, `"--port" flag: want 0 to 65535`},
		{[]string{"verify", "--jobs", "-2"}, `"--jobs" flag: want ≥ 0`},
	} {
		_, err := run(tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
	help, err := run("serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--plan FILE ", "--bundle DIR ", "--drain-timeout DURATION ", "--queue-depth N ", "--log-format FORMAT "} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

// TestCompletion: the shells complete --target, --log-format values.
func TestCompletion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--log-format", ""}, []string{"text", "json"}},
		{[]string{"serve", "--target", ""}, []string{"cpu", "sm_90", "gfx1151"}},
		{[]string{"probe", "bench", "--target", "s"}, []string{"cpu", "sm_90", "gfx1151"}},
	} {
		out, err := run(append([]string{"__complete"}, tt.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			if line := sc.Text(); !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%v (-want +got)\n%s", tt.args, diff)
		}
		if !strings.Contains(out, ":4\n") { // ShellCompDirectiveNoFileComp
			t.Errorf("%v: %q does not turn off file completion", tt.args, out)
		}
	}
}
