package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/prefixcache"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/server/auth"
	"github.com/aimaproject/aimac/server/metrics"
	"github.com/aimaproject/aimac/server/queue"
	"github.com/aimaproject/aimac/server/sdnotify"
)

// Config is the server's behaviour; zero values take the defaults.
type Config struct {
	APIKey          string        // "" disables authentication
	QueueDepth      int           // waiting requests (default 16)
	QueueTimeout    time.Duration // longest wait in the queue (default 5m)
	RequestTimeout  time.Duration // end-to-end deadline of a request (default 30m)
	DrainTimeout    time.Duration // how long shutdown waits for the admitted requests (default 30s)
	MaxBodyBytes    int64         // request body limit (default 4 MiB)
	EnableShutdown  bool          // POST /shutdown
	DisableThinking bool          // answer without thinking unless a request asks for it
	ResponsesStore  int           // stored Responses API objects (default 256)
	// PrefixCacheEntries and PrefixCacheBytes bound the prefix cache of
	// engine snapshots; either ≤ 0 disables it.
	PrefixCacheEntries int
	PrefixCacheBytes   int64
	Logger             *slog.Logger
}

func (c *Config) defaults() {
	if c.QueueDepth <= 0 {
		c.QueueDepth = 16
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = 5 * time.Minute
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.ResponsesStore <= 0 {
		c.ResponsesStore = 256
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Server serves one model.
type Server struct {
	cfg       Config
	log       *slog.Logger
	queue     *queue.Queue
	metrics   *metrics.Metrics
	responses *store
	prefix    *prefixCache
	router    chi.Router

	mu    sync.RWMutex
	model *Model // nil until loaded

	ready        atomic.Bool
	shuttingDown atomic.Bool
	shutdownOnce sync.Once
	shutdownCh   chan struct{} // closed when shutdown is asked for (signal or POST /shutdown)
	baseCtx      context.Context
	cancelAll    context.CancelCauseFunc // ends every request's context, with errShuttingDown
	created      int64

	// hs and served are the HTTP server Serve started and its result,
	// for Close.
	hs     *http.Server
	served chan error
}

// errShuttingDown is the cause of the requests cancelled at the drain
// deadline: they end with 503 service_shutting_down.
var errShuttingDown = errors.New("the server is shutting down")

// closeGrace bounds how long the cancelled requests of a drain that ran out
// of time may take to write their last event, and idle connections to
// close: the engine stops a cancelled step inside its launch.
const closeGrace = 5 * time.Second

// New makes a server; SetModel makes it ready.
func New(cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, log: cfg.Logger, shutdownCh: make(chan struct{}), created: time.Now().Unix()}
	s.baseCtx, s.cancelAll = context.WithCancelCause(context.Background())
	s.queue = queue.New(queue.Config{Depth: cfg.QueueDepth, WaitTimeout: cfg.QueueTimeout})
	s.metrics = metrics.New(func() (int, int) { st := s.queue.Stats(); return st.Waiting, st.Running })
	s.responses = newStore(cfg.ResponsesStore)
	s.prefix = prefixcache.New[*runtime.Snapshot](cfg.PrefixCacheEntries, cfg.PrefixCacheBytes)
	s.metrics.SetPrefixCacheStats(func() (int, int64, int64, uint64) {
		st := s.prefix.Stats()
		return st.Entries, st.Bytes, st.DeviceBytes, st.Evictions
	})
	s.router = s.routes()
	return s
}

// SetModel installs the loaded, warmed model and marks the server ready.
func (s *Server) SetModel(m *Model) {
	s.mu.Lock()
	s.model = m
	s.mu.Unlock()
	s.ready.Store(m != nil)
	if m != nil {
		if _, err := sdnotify.Notify("READY=1"); err != nil {
			s.log.Warn("systemd notify", "error", err)
		}
	}
}

func (s *Server) currentModel() *Model {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.model
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	// observe wraps recoverer so that a recovered panic is counted and
	// logged as the 500 it became.
	r.Use(s.requestID, s.observe, s.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, openai.NotFound("no route for "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 lists the methods the path accepts.
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if r.Match(chi.NewRouteContext(), m, req.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		writeError(w, openai.MethodNotAllowed())
	})
	r.Get("/health", s.health)
	r.Get("/ready", s.readyz)
	r.Group(func(r chi.Router) {
		r.Use(auth.Middleware(s.cfg.APIKey))
		r.Handle("/metrics", s.metrics.Handler())
		r.Get("/v1/models", s.listModels)
		// Model ids may hold slashes ("Qwen/Qwen3.6-35B-A3B").
		r.Get("/v1/models/*", s.getModel)
		r.Group(func(r chi.Router) {
			r.Use(s.jsonBody)
			r.Post("/v1/chat/completions", s.chatCompletions)
			r.Post("/v1/completions", s.completions)
			r.Post("/v1/responses", s.createResponse)
			r.Post("/tokenize", s.tokenize)
			r.Post("/detokenize", s.detokenize)
			if s.cfg.EnableShutdown {
				r.Post("/shutdown", s.shutdownEndpoint)
			}
		})
		r.Get("/v1/responses/{id}", s.getResponse)
		r.Delete("/v1/responses/{id}", s.deleteResponse)
	})
	return r
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	arrivalKey          // when the request arrived, for time to first token
	partsKey            // the parts of its time to first token (*ttftParts)
)

// requestID tags every request with an id, echoed in x-request-id.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			id = newID("req_")
		}
		w.Header().Set("X-Request-Id", id)
		now := time.Now()
		ctx := withParts(context.WithValue(context.WithValue(r.Context(), requestIDKey, id), arrivalKey, now), now)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func reqID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// recoverer turns a panic into a logged 500: no input may crash the process.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic", "request_id", reqID(r), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				e := openai.Internal("internal error (request " + reqID(r) + ")")
				sw := statusOf(w)
				if sw == nil || sw.status == 0 {
					writeError(w, e)
					return
				}
				// The response had begun: count it as the 500 it became and
				// end a chat or completions stream as any error after the
				// headers ends, with an error chunk and [DONE].
				sw.status = http.StatusInternalServerError
				if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") && r.URL.Path != "/v1/responses" {
					b, _ := openai.Marshal(e)
					w.Write([]byte("data: " + string(b) + "\n\ndata: [DONE]\n\n"))
					http.NewResponseController(w).Flush()
				}
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// statusWriter remembers the status for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	status int
	gone   bool // the client left before the response was complete
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusClientClosed counts requests whose client left early.
const statusClientClosed = 499

// observe logs each request and counts it by route and status.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		if sw.gone {
			sw.status = statusClientClosed
		}
		d := time.Since(start)
		s.metrics.Request(route, sw.status, d)
		s.log.Info("request", append([]any{"request_id", reqID(r), "method", r.Method, "path", r.URL.Path, "status", sw.status, "duration", d},
			partsOf(r.Context()).logAttrs()...)...)
	})
}

// jsonBody enforces the body limit and reads every body as JSON whatever
// its content type says — `curl -d` sends application/x-www-form-urlencoded
// — except a multipart form, which cannot be one JSON value (415).
func (s *Server) jsonBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err == nil && strings.HasPrefix(mt, "multipart/") {
				writeError(w, openai.UnsupportedMediaType())
				return
			}
		}
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(w, openai.BodyTooLarge(s.cfg.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// readBody reads a request body under the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *openai.Error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, openai.BodyTooLarge(s.cfg.MaxBodyBytes)
		}
		return nil, openai.InvalidRequest("", "reading the request body: "+err.Error())
	}
	return body, nil
}

// decodeBody reads a request body under the limit and decodes it; on
// failure it has written the error response and returns false.
func decodeBody[T any](s *Server, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, *openai.Error)) (T, bool) {
	var req T
	body, apiErr := s.readBody(w, r)
	if apiErr == nil {
		if req, apiErr = decode(body); apiErr == nil {
			return req, true
		}
	}
	writeError(w, apiErr)
	return req, false
}

// writeError writes an OpenAI error response.
func writeError(w http.ResponseWriter, e *openai.Error) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, e)
}

// writeJSON writes v as the SSE streams do, without escaping <, > and &, so
// that streamed and non-streamed text read the same on the wire.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := openai.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Ready is the readiness line printed once the server listens.
type Ready struct {
	Event         string `json:"event"`
	Address       string `json:"address"`
	Model         string `json:"model"`
	ContextTokens int    `json:"context_tokens"`
	Target        string `json:"target"`
}

// Serve serves on a bound listener until ctx is done or shutdown is asked
// for, then drains and returns nil: new requests get 503
// service_shutting_down, the admitted ones run within the drain deadline,
// and at the deadline what still runs or waits is cancelled and answered
// 503 service_shutting_down (a stream ends with an error event and [DONE]).
// When Serve returns no request uses the engine any more, so the caller
// may free it; the listener still answers 503 until Close.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.router, ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return s.baseCtx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	case <-s.shutdownCh:
	}
	s.hs, s.served = hs, errc
	s.drain()
	return nil
}

// drain stops admitting and waits for the requests in hand, cancelling
// them at the drain deadline.
func (s *Server) drain() {
	s.log.Info("shutting down", "drain_timeout", s.cfg.DrainTimeout)
	sdnotify.Notify("STOPPING=1")
	s.shuttingDown.Store(true)
	s.queue.Close()
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	if s.queue.Drain(dctx) == nil {
		return
	}
	st := s.queue.Stats()
	s.log.Warn("drain deadline passed: cancelling the requests in hand", "running", st.Running, "waiting", st.Waiting)
	s.cancelAll(errShuttingDown)
	gctx, gcancel := context.WithTimeout(context.Background(), closeGrace)
	defer gcancel()
	if err := s.queue.Drain(gctx); err != nil {
		s.log.Error("cancelled requests did not end", "within", closeGrace)
	}
}

// Close stops the listener Serve left answering 503, after Serve has
// returned: it closes idle connections, gives the requests still being
// answered (a 503, /health) a moment, then closes every connection. No
// generation runs by then, and connections a client opened without a
// request would hold a graceful shutdown for seconds.
func (s *Server) Close() error {
	if s.hs == nil {
		return nil
	}
	s.cancelAll(errShuttingDown)
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil {
		s.hs.Close()
	}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	s.hs = nil
	return nil
}

// Shutdown asks a serving server to drain and stop.
func (s *Server) Shutdown() {
	s.shutdownOnce.Do(func() { close(s.shutdownCh) })
}

func (s *Server) shutdownEndpoint(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "shutting_down"})
	s.Shutdown()
}
