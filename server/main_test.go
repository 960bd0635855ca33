package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/server"
	"github.com/aimaproject/aimac/synth"
	"github.com/aimaproject/aimac/tokenizer"
)

// modelID is the id the test servers serve; the slash checks that ids in
// the Hugging Face form route.
const modelID = "test/tiny"

// fixture is the tiny synthetic checkpoint, written once per test binary:
// its real tokenizer, chat template and generation config.
type fixture struct {
	dir  string
	tok  *tokenizer.Tokenizer
	tmpl *chat.Template
	gen  loader.Generation
	stop []int32 // <|im_end|> and <|endoftext|> with the config's EOS
	end  int32   // <|im_end|>
}

var (
	fixOnce sync.Once
	fix     fixture
	fixErr  error
	tempDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tempDir != "" {
		os.RemoveAll(tempDir)
	}
	os.Exit(code)
}

// tiny returns the shared fixture, writing the checkpoint on first use.
func tiny(t testing.TB) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		if tempDir, fixErr = os.MkdirTemp("", "server-test-"); fixErr != nil {
			return
		}
		fix.dir = filepath.Join(tempDir, "tiny")
		if fixErr = synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: fix.dir}); fixErr != nil {
			return
		}
		if fix.tok, fixErr = tokenizer.LoadDir(fix.dir); fixErr != nil {
			return
		}
		if fix.tmpl, fixErr = chat.Load(fix.dir); fixErr != nil {
			return
		}
		if fix.gen, fixErr = loader.GenerationConfig(fix.dir); fixErr != nil {
			return
		}
		fix.stop = append([]int32(nil), fix.gen.EOS...)
		for _, special := range []string{"<|im_end|>", "<|endoftext|>"} {
			id, ok := fix.tok.ID(special)
			if !ok {
				fixErr = errors.New("the tiny tokenizer has no " + special)
				return
			}
			if special == "<|im_end|>" {
				fix.end = id
			}
			fix.stop = append(fix.stop, id)
		}
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return &fix
}

// model wraps an engine with the fixture's tokenizer and template, as the
// serve command does.
func (f *fixture) model(e server.Engine) *server.Model {
	return &server.Model{ID: modelID, Engine: e, Tokenizer: f.tok, Template: f.tmpl, StopIDs: f.stop,
		VocabLimit: f.tok.Size(), Target: "test", Sampling: f.gen.Sampling}
}

// scripted is a server.Engine whose logits put all the mass on the next
// token of a scripted answer, so that any sampler picks it: the server's
// parsing, streaming and scheduling are tested on output chosen by the test.
type scripted struct {
	capacity int
	vocab    int // the logits' width, with padding ids past the tokenizer
	limit    int // the tokenizer's size: ids at or above are padding
	end      int32

	mu      sync.Mutex
	delay   time.Duration // each Decode takes this long
	answer  []int32       // the scripted tokens; <|im_end|> follows
	loop    bool          // repeat the answer forever instead of ending
	pos     int           // tokens in the sequence
	step    int           // answer tokens fed back so far
	prompt  []int32       // the latest prefilled prompt
	wrong   []int32       // fed-back tokens that were not the scripted ones
	panicAt int           // Decode panics at this step when > 0

	decodes  atomic.Int64 // Decode calls, ever
	prefills atomic.Int64
}

// newScripted returns a scripted engine for the fixture's vocabulary.
func newScripted(f *fixture) *scripted {
	return &scripted{capacity: 4096, limit: f.tok.Size(), vocab: f.tok.Size() + 64, end: f.end}
}

// say scripts the next answers: the tokens of text, then <|im_end|>.
func (e *scripted) say(f *fixture, text string) *scripted {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer, e.loop = f.tok.Encode(text), false
	return e
}

// forever scripts an answer that repeats text without end.
func (e *scripted) forever(f *fixture, text string) *scripted {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer, e.loop = f.tok.Encode(text), true
	return e
}

func (e *scripted) Capacity() int { return e.capacity }
func (e *scripted) Vocab() int    { return e.vocab }

func (e *scripted) Reset() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pos, e.step = 0, 0
	return nil
}

func (e *scripted) Prefill(ctx context.Context, tokens []int32, _ runtime.RowsFunc) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.prefills.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(tokens) == 0 || e.pos+len(tokens) > e.capacity {
		return nil, errors.New("scripted: prefill beyond the context")
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= e.vocab {
			return nil, errors.New("scripted: token id outside the vocabulary")
		}
	}
	e.pos += len(tokens)
	e.prompt = append([]int32(nil), tokens...)
	return e.logitsLocked(), nil
}

// slow makes each Decode take d.
func (e *scripted) slow(d time.Duration) *scripted {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delay = d
	return e
}

func (e *scripted) Decode(_ context.Context, token int32) ([]float32, error) {
	e.decodes.Add(1)
	e.mu.Lock()
	delay := e.delay
	e.mu.Unlock()
	// The delay ignores ctx: the server must check it between steps
	// itself, whatever the engine does.
	time.Sleep(delay)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pos >= e.capacity {
		return nil, errors.New("scripted: context full")
	}
	if want := e.nextLocked(); token != want {
		e.wrong = append(e.wrong, token)
	}
	e.step++
	e.pos++
	if e.panicAt > 0 && e.step >= e.panicAt {
		panic("scripted: engine fault")
	}
	return e.logitsLocked(), nil
}

// nextLocked is the token the answer continues with.
func (e *scripted) nextLocked() int32 {
	switch {
	case len(e.answer) == 0:
		return e.end
	case e.loop:
		return e.answer[e.step%len(e.answer)]
	case e.step < len(e.answer):
		return e.answer[e.step]
	}
	return e.end
}

// logitsLocked puts the mass on the next token. The others fall off
// gently by id, so that top_logprobs lists a stable order, and the padding
// ids get the largest logits of all: a server that forgot to mask them
// would sample ids the tokenizer cannot decode.
func (e *scripted) logitsLocked() []float32 {
	l := make([]float32, e.vocab)
	for i := range l {
		if i >= e.limit {
			l[i] = 1000
		} else {
			l[i] = -float32(i) / float32(e.limit)
		}
	}
	l[e.nextLocked()] = 60
	return l
}

// lastIDs returns the latest prefilled prompt.
func (e *scripted) lastIDs(t *testing.T) []int32 {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prompt == nil {
		t.Fatal("no prompt was prefilled")
	}
	return e.prompt
}

// lastPrompt returns the text of the latest prefilled prompt.
func (e *scripted) lastPrompt(t *testing.T, f *fixture) string {
	t.Helper()
	text, err := f.tok.Decode(e.lastIDs(t), false)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// checkFed fails the test when the server fed back tokens other than the
// ones the logits chose.
func (e *scripted) checkFed(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.wrong) > 0 {
		t.Errorf("the server fed back unscripted tokens %v", e.wrong)
	}
}

// harness is a server under test with its engine and HTTP front.
type harness struct {
	f   *fixture
	srv *server.Server
	eng *scripted
	ts  *httptest.Server
}

// start serves a scripted engine; thinking is on by default, as the serve
// command's default.
func start(t *testing.T, cfg server.Config) *harness {
	t.Helper()
	f := tiny(t)
	h := &harness{f: f, eng: newScripted(f)}
	h.srv = server.New(cfg)
	h.srv.SetModel(f.model(h.eng))
	h.ts = httptest.NewServer(h.srv.Handler())
	t.Cleanup(h.ts.Close)
	return h
}

// client is the official OpenAI Go client pointed at the test server,
// without retries so that statuses are seen as sent.
func (h *harness) client(opts ...option.RequestOption) oai.Client {
	return oai.NewClient(append([]option.RequestOption{option.WithBaseURL(h.ts.URL + "/v1"),
		option.WithAPIKey("test-key"), option.WithMaxRetries(0)}, opts...)...)
}

// reply is a raw HTTP response with its body read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the error body's code, "" when there is none.
func (r reply) errorCode() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// do sends a request with a JSON body (any non-[]byte value is marshalled).
func (h *harness) do(t testing.TB, method, path string, body any, header ...string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// decode unmarshals a reply body that must be JSON with status 200.
func decode[T any](t testing.TB, r reply) T {
	t.Helper()
	var v T
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%v in %s", err, r.body)
	}
	return v
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// readSSE splits an event stream into events; it fails unless the stream
// ends after "data: [DONE]" (which it leaves out) when done is true.
func readSSE(t testing.TB, body io.Reader, done bool) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sawDone := false
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				if sawDone {
					t.Errorf("event after [DONE]: %+v", cur)
				}
				if cur.data == "[DONE]" {
					sawDone = true
				} else {
					evs = append(evs, cur)
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, ":"):
		default:
			t.Errorf("unexpected stream line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if done && !sawDone {
		t.Errorf("the stream did not end with [DONE]")
	}
	return evs
}

// stream posts body and returns the events of a 200 event stream; chat
// and completion streams end with [DONE], Responses streams do not.
func (h *harness) stream(t testing.TB, path string, body any) []sseEvent {
	t.Helper()
	r := h.do(t, http.MethodPost, path, body)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	return readSSE(t, bytes.NewReader(r.body), path != "/v1/responses")
}

// healthBody is what /health says.
type healthBody struct {
	Status        string    `json:"status"`
	Ready         bool      `json:"ready"`
	Model         string    `json:"model"`
	ContextTokens int       `json:"context_tokens"`
	ShuttingDown  bool      `json:"shutting_down"`
	Queue         queueBody `json:"queue"`
}

type queueBody struct {
	Waiting   int    `json:"waiting"`
	Running   int    `json:"running"`
	Depth     int    `json:"depth"`
	Admitted  uint64 `json:"admitted"`
	Rejected  uint64 `json:"rejected"`
	TimedOut  uint64 `json:"timed_out"`
	Cancelled uint64 `json:"cancelled"`
}

// health reads /health.
func (h *harness) health(t testing.TB) healthBody {
	t.Helper()
	return decode[healthBody](t, h.do(t, http.MethodGet, "/health", nil))
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// userChat is a one-message chat request body with extra fields.
func userChat(text string, extra map[string]any) map[string]any {
	b := map[string]any{"model": modelID, "messages": []map[string]any{{"role": "user", "content": text}}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}
