package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/chat"
	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/server"
	"github.com/aimaproject/aimac/server/auth"
	"github.com/aimaproject/aimac/sums"
	"github.com/aimaproject/aimac/synth"
	"github.com/aimaproject/aimac/tokenizer"
)

// serveFlags are serve's options.
type serveFlags struct {
	load        loadFlags
	host        string
	port        int
	apiKeyFile  string
	allowUnauth bool
	name        string
	logFormat   string
	demo        bool
	cacheMiB    int64
	deviceMiB   int64
	thinking    bool
	cfg         server.Config
}

func serveCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the model through an OpenAI-compatible HTTP API",
		Long: `Serve the model: /v1/chat/completions, /v1/completions, /v1/responses,
/v1/models, /tokenize, /detokenize, /health, /ready and /metrics.

The address is bound first (a port conflict fails at once); then the model is
loaded and warmed, a JSON readiness line is printed on stdout, and requests are
served by one engine worker behind a bounded queue. SIGINT or SIGTERM stops
admitting requests (503 service_shutting_down), lets the admitted ones finish
within --drain-timeout, cancels what is left at that deadline (a stream ends with
an error event and [DONE], anything else gets 503), frees the engine once its
worker has returned, and exits 0.

--demo synthesizes the tiny model and serves it on the CPU backend: nothing to download.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, &f) },
	}
	fl := c.Flags()
	f.load.registerModel(c)
	fl.StringVar(&f.host, "host", "127.0.0.1", "`ADDRESS` to listen on")
	cliflag.Port(fl, &f.port, "port", 8000, "`PORT` to listen on (0: any free port)")
	fl.StringVar(&f.apiKeyFile, "api-key-file", "", "`FILE` holding the API key (must not be group/world-readable)")
	fl.BoolVar(&f.allowUnauth, "allow-unauthenticated", false, "allow a non-loopback address without an API key")
	fl.StringVar(&f.name, "model-name", "", "model `ID` in the API (default: the model directory's name)")
	fl.StringVar(&f.logFormat, "log-format", "text", "log `FORMAT` on stderr: "+strings.Join(logFormats, " or "))
	fl.BoolVar(&f.demo, "demo", false, "serve a synthesized tiny model on the CPU backend")
	cliflag.Int(fl, &f.cfg.QueueDepth, "queue-depth", 16, 1, "`N` requests that may wait for the engine")
	cliflag.Duration(fl, &f.cfg.QueueTimeout, "queue-timeout", 5*time.Minute, "longest wait in the queue, a `DURATION` (503 queue_timeout)")
	cliflag.Duration(fl, &f.cfg.RequestTimeout, "request-timeout", 30*time.Minute, "end-to-end deadline of a request, a `DURATION` (504)")
	cliflag.Duration(fl, &f.cfg.DrainTimeout, "drain-timeout", 30*time.Second, "how long shutdown waits for the admitted requests before cancelling them, a `DURATION` (503 service_shutting_down)")
	cliflag.Int64(fl, &f.cfg.MaxBodyBytes, "max-body-bytes", 4<<20, 1, "request body limit in `BYTES` (413 beyond)")
	fl.BoolVar(&f.cfg.EnableShutdown, "enable-shutdown-endpoint", false, "accept POST /shutdown")
	fl.BoolVar(&f.thinking, "enable-thinking", true, "think before answering unless a request says otherwise")
	cliflag.Int(fl, &f.cfg.ResponsesStore, "responses-store", 256, 1, "`N` Responses API objects kept for previous_response_id")
	cliflag.Int(fl, &f.cfg.PrefixCacheEntries, "prefix-cache-entries", 16, 0, "`N` state snapshots the prefix cache keeps (0 disables it)")
	cliflag.MiB(fl, &f.cacheMiB, "prefix-cache-mib", 4096, 0, "host memory the prefix cache may hold, in `MiB` (0 disables it)")
	cliflag.MiB(fl, &f.deviceMiB, "prefix-cache-device-mib", 8192, 0, "GPU memory the prefix cache's snapshots may stay in, in `MiB`, at most half of what is free after loading (0: host memory only); the least recently used move to host memory")
	_ = c.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions(logFormats, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// logFormats are --log-format's values.
var logFormats = []string{"text", "json"}

func serve(cmd *cobra.Command, f *serveFlags) error {
	var handler slog.Handler
	switch f.logFormat {
	case "text":
		handler = slog.NewTextHandler(cmd.ErrOrStderr(), nil)
	case "json":
		handler = slog.NewJSONHandler(cmd.ErrOrStderr(), nil)
	default:
		return fmt.Errorf("--log-format %q: want text or json", f.logFormat)
	}
	log := slog.New(handler)
	f.cfg.Logger = log

	if f.apiKeyFile != "" {
		key, err := auth.LoadKeyFile(f.apiKeyFile)
		if err != nil {
			return err
		}
		f.cfg.APIKey = key
	}
	if err := auth.CheckBind(f.host, f.cfg.APIKey != "", f.allowUnauth); err != nil {
		return err
	}
	if f.demo {
		if f.load.o.ModelDir != "" {
			return fmt.Errorf("--demo serves its own model: drop --model-dir")
		}
		dir, err := os.MkdirTemp("", "aima-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		f.load.o.ModelDir = filepath.Join(dir, "tiny")
		log.Info("synthesizing the demo model", "dir", f.load.o.ModelDir)
		if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: f.load.o.ModelDir}); err != nil {
			return err
		}
		if f.name == "" {
			f.name = "aima-demo-tiny"
		}
	}
	if f.load.o.ModelDir == "" {
		return fmt.Errorf("--model-dir is required (or --demo)")
	}
	if err := f.load.parseBuckets(); err != nil {
		return err
	}
	if err := f.load.parseSynthetic(); err != nil {
		return err
	}
	if err := f.load.openBundle(); err != nil {
		return err
	}
	f.cfg.DisableThinking = !f.thinking
	if f.demo && !cmd.Flags().Changed("prefix-cache-mib") {
		f.cacheMiB = 256 // the tiny model's snapshots are small
	}
	f.cfg.PrefixCacheBytes = f.cacheMiB << 20
	if f.cfg.PrefixCacheEntries == 0 {
		f.cfg.PrefixCacheBytes = 0
	}
	f.load.o.PrefixCacheBytes = f.cfg.PrefixCacheBytes
	// Bind first: a port conflict fails before the model is loaded.
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return err
	}
	srv := server.New(f.cfg)
	ctx := cmd.Context()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	if !f.demo && !f.load.o.Synthetic {
		if _, err := os.Stat(filepath.Join(f.load.o.ModelDir, sums.File)); errors.Is(err, fs.ErrNotExist) {
			log.Info("no "+sums.File+" in the model directory: `aima-engine verify --model-dir DIR --write-manifest` records the files' sums so that later damage is caught", "dir", f.load.o.ModelDir)
		}
	}

	// Deferred first, so it runs last: the listener answers 503 until the
	// engine below has been freed.
	defer srv.Close()

	l, m, err := loadModel(ctx, f, cmd.ErrOrStderr())
	if err != nil {
		srv.Shutdown()
		<-served
		if ctx.Err() != nil {
			// Stopped while loading: a clean stop, not a failure.
			log.Info("stopped before the model was ready", "reason", err)
			return nil
		}
		return err
	}
	// Serve returns once no request uses the engine: only then is it freed.
	defer l.Close()
	srv.SetModel(m)
	ready, _ := json.Marshal(server.Ready{Event: "ready", Address: "http://" + ln.Addr().String(), Model: m.ID,
		ContextTokens: m.Engine.Capacity(), Target: m.Target})
	fmt.Fprintln(cmd.OutOrStdout(), string(ready))
	log.Info("serving", "address", ln.Addr().String(), "model", m.ID)
	if err := <-served; err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// loadModel loads the engine, tokenizer, template and generation config,
// and warms the engine up.
func loadModel(ctx context.Context, f *serveFlags, stderr io.Writer) (*loader.Loaded, *server.Model, error) {
	dir := f.load.o.ModelDir
	tok, tmpl, gen, err := readModelFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	o := f.load.o
	o.Progress = terminal(stderr)
	l, err := loader.Open(o)
	if err != nil {
		return nil, nil, err
	}
	if err := f.load.configure(l.Engine); err != nil {
		l.Close()
		return nil, nil, err
	}
	fmt.Fprint(stderr, l.Memory.String())
	if err := deviceSnapshots(l, f); err != nil {
		l.Close()
		return nil, nil, err
	}
	name := f.name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	m := &server.Model{ID: name, Engine: l.Engine, Tokenizer: tok, Template: tmpl, StopIDs: gen.EOS,
		VocabLimit: tok.Size(), Target: string(l.Plan.Target), Sampling: gen.Sampling}
	for _, special := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, ok := tok.ID(special); ok && !containsID(m.StopIDs, id) {
			m.StopIDs = append(m.StopIDs, id)
		}
	}
	// Warm up: one short prefill and one decode step.
	if _, err := l.Engine.Prefill(ctx, tok.Encode("Hello"), nil); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := l.Engine.Reset(); err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, m, nil
}

// deviceSnapshots bounds the GPU memory the prefix cache's snapshots may
// stay in: --prefix-cache-device-mib, at most half of the device memory free
// after loading. On the CPU every snapshot is in host memory anyway.
func deviceSnapshots(l *loader.Loaded, f *serveFlags) error {
	n := f.deviceMiB << 20
	if l.Plan.Target == plan.CPU || f.cfg.PrefixCacheBytes == 0 || n == 0 {
		return nil
	}
	if mi, ok := l.Backend.(interface {
		MemInfo() (free, total uint64, err error)
	}); ok {
		if free, _, err := mi.MemInfo(); err == nil {
			n = min(n, int64(free/2))
		}
	}
	if err := l.Engine.SetSnapshotDeviceBytes(n); err != nil {
		return fmt.Errorf("prefix cache device memory: %w", err)
	}
	f.cfg.Logger.Info("prefix cache", "host_bytes", f.cfg.PrefixCacheBytes, "device_bytes", n)
	return nil
}

// readModelFiles reads what serving needs of a model directory besides
// the weights: the tokenizer, the chat template and the generation config.
func readModelFiles(dir string) (*tokenizer.Tokenizer, *chat.Template, loader.Generation, error) {
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, nil, loader.Generation{}, err
	}
	tmpl, err := chat.Load(dir)
	if err != nil {
		return nil, nil, loader.Generation{}, err
	}
	gen, err := loader.GenerationConfig(dir)
	if err != nil {
		return nil, nil, loader.Generation{}, err
	}
	return tok, tmpl, gen, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
