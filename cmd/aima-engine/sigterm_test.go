package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigtermChild is set in the environment of the process
// TestServeSIGTERM starts: TestMain then runs aima-engine's main with the
// arguments after "--" instead of the tests.
const sigtermChild = "AIMA_ENGINE_SIGTERM_CHILD"

// TestMain runs the package's tests, or, in TestServeSIGTERM's child
// process, aima-engine itself.
func TestMain(m *testing.M) {
	if os.Getenv(sigtermChild) != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"aima-engine"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestServeSIGTERM is the shutdown as an operator meets it: `serve --demo
// --drain-timeout 1s` as a process, eight streams (one running, seven
// queued), then SIGTERM. The process must exit 0 every time, having ended
// every stream properly, and leave no temporary directory behind.
func TestServeSIGTERM(t *testing.T) {
	for range 3 {
		tmp := t.TempDir()
		cmd := exec.Command(os.Args[0], "--",
			"serve", "--demo", "--port", "0", "--drain-timeout", "1s", "--buckets", "16,64", "--context-tokens", "2048")
		cmd.Env = append(os.Environ(), sigtermChild+"=1", "TMPDIR="+tmp)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		var ready struct{ Address string }
		if !lines.Scan() || json.Unmarshal(lines.Bytes(), &ready) != nil || ready.Address == "" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no readiness line; stderr:\n%s", stderr.String())
		}
		go io.Copy(io.Discard, stdout)

		body := `{"model":"aima-demo-tiny","messages":[{"role":"user","content":"talk"}],"reasoning_effort":"none","max_tokens":1900,"stream":true}`
		first := make(chan struct{}, 8)
		ends := make(chan string, 8)
		for range 8 {
			go func() { ends <- readStream(ready.Address, body, first) }()
		}
		select {
		case <-first:
		case <-time.After(30 * time.Second):
			t.Fatal("no stream began")
		}
		time.Sleep(100 * time.Millisecond) // the other seven are queued by now
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("aima-engine exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("aima-engine did not exit after SIGTERM; stderr:\n%s", stderr.String())
		}
		for range 8 {
			end := <-ends
			t.Log(end)
			if end != "error service_shutting_down, [DONE]" && end != "503 service_shutting_down" && end != "finished, [DONE]" {
				t.Errorf("a stream ended as %q", end)
			}
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range left {
			t.Errorf("left behind in the temporary directory: %s", e.Name())
		}
	}
}

// readStream posts a streaming chat request and says how it ended; first
// gets a value at the first chunk.
func readStream(base, body string, first chan<- struct{}) string {
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var e struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		json.NewDecoder(resp.Body).Decode(&e)
		if e.Error != nil {
			return resp.Status[:3] + " " + e.Error.Code
		}
		return resp.Status
	}
	end, began := "cut", false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if !began {
			began = true
			first <- struct{}{}
		}
		if data == "[DONE]" {
			return end + ", [DONE]"
		}
		e.Error, e.Choices = nil, nil
		json.Unmarshal([]byte(data), &e)
		switch {
		case e.Error != nil:
			end = "error " + e.Error.Code
		case len(e.Choices) == 1 && e.Choices[0].FinishReason != nil:
			end = "finished"
		}
	}
	return end + " without [DONE]"
}
