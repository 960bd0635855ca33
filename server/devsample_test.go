package server_test

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/server"
)

// countingEngine is the real CPU engine counting how the server decodes:
// host sampling (Decode, logits read back) or device sampling
// (DecodeSampled). With host set it hides the device sampler.
type countingEngine struct {
	*runtime.Engine
	host             bool
	decodes, sampled atomic.Int64
}

func (e *countingEngine) CanSample() bool { return !e.host && e.Engine.CanSample() }

func (e *countingEngine) Decode(ctx context.Context, token int32) ([]float32, error) {
	e.decodes.Add(1)
	return e.Engine.Decode(ctx, token)
}

func (e *countingEngine) DecodeSampled(ctx context.Context, token int32, s runtime.DeviceSampling, step int) (int32, float32, error) {
	e.sampled.Add(1)
	return e.Engine.DecodeSampled(ctx, token, s, step)
}

// TestDeviceSampling serves the tiny checkpoint on the CPU engine through
// the device sampler and through the host Sampler: greedy answers (and
// their logprobs) are the same both ways; requests the device cannot
// sample (penalties, top_logprobs) fall back to the host; a seed
// reproduces a sampled answer on the device, streamed or not.
func TestDeviceSampling(t *testing.T) {
	t.Parallel()
	f := tiny(t)
	l, err := loader.Open(loader.Options{ModelDir: f.dir, Buckets: []int{16, 64}, ContextTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Engine.CanSample() {
		t.Fatal("the loaded engine has no device sampler")
	}
	serve := func(e *countingEngine) oai.Client {
		srv := server.New(server.Config{})
		srv.SetModel(f.model(e))
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		return oai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	}
	dev, host := &countingEngine{Engine: l.Engine}, &countingEngine{Engine: l.Engine, host: true}
	devC, hostC := serve(dev), serve(host)
	ctx := context.Background()
	ask := func(t *testing.T, c oai.Client, p oai.ChatCompletionNewParams, opts ...option.RequestOption) answer {
		t.Helper()
		res, err := c.Chat.Completions.New(ctx, p, opts...)
		if err != nil {
			var apiErr *oai.Error
			if errors.As(err, &apiErr) {
				t.Fatal(apiErr.RawJSON())
			}
			t.Fatal(err)
		}
		return fromCompletion(t, res)
	}

	t.Run("greedy", func(t *testing.T) {
		for _, user := range []string{"Hello! Who are you?", "Write a haiku about the sea.", "2+2="} {
			p := params(user)
			p.Temperature, p.MaxCompletionTokens, p.Logprobs = oai.Float(0), oai.Int(32), oai.Bool(true)
			d0, h0 := dev.sampled.Load(), host.decodes.Load()
			onDevice, onHost := ask(t, devC, p), ask(t, hostC, p)
			if dev.sampled.Load() == d0 && onDevice.Completion > 1 || host.decodes.Load() == h0 && onHost.Completion > 1 {
				t.Fatalf("%q: the paths were not taken (%d device, %d host decodes)", user, dev.sampled.Load()-d0, host.decodes.Load()-h0)
			}
			if len(onDevice.Logprobs) != len(onHost.Logprobs) || len(onHost.Logprobs) == 0 {
				t.Fatalf("%q: %d logprobs on the device, %d on the host", user, len(onDevice.Logprobs), len(onHost.Logprobs))
			}
			for i := range onHost.Logprobs {
				if math.Abs(onDevice.Logprobs[i].Logprob-onHost.Logprobs[i].Logprob) > 1e-4 {
					t.Errorf("%q, token %d: logprob %g on the device, %g on the host", user, i, onDevice.Logprobs[i].Logprob, onHost.Logprobs[i].Logprob)
				}
				onDevice.Logprobs[i].Logprob = onHost.Logprobs[i].Logprob
			}
			if diff := cmp.Diff(onHost, onDevice); diff != "" {
				t.Errorf("%q: device greedy differs from host greedy (-host +device):\n%s", user, diff)
			}
		}
	})

	t.Run("host only", func(t *testing.T) {
		for name, set := range map[string]func(*oai.ChatCompletionNewParams){
			"presence penalty": func(p *oai.ChatCompletionNewParams) { p.PresencePenalty = oai.Float(0.5) },
			"top_logprobs":     func(p *oai.ChatCompletionNewParams) { p.Logprobs, p.TopLogprobs = oai.Bool(true), oai.Int(2) },
		} {
			p := params("Hi")
			p.Temperature, p.MaxCompletionTokens = oai.Float(0), oai.Int(6)
			set(&p)
			d0, h0 := dev.sampled.Load(), dev.decodes.Load()
			if a := ask(t, devC, p); a.Completion > 1 && (dev.sampled.Load() != d0 || dev.decodes.Load() == h0) {
				t.Errorf("%s: %d device and %d host decodes", name, dev.sampled.Load()-d0, dev.decodes.Load()-h0)
			}
		}
	})

	t.Run("seeded", func(t *testing.T) {
		p := params("Tell me a story.")
		p.Temperature, p.TopP, p.MaxCompletionTokens, p.Seed = oai.Float(1), oai.Float(0.95), oai.Int(24), oai.Int(7)
		a := ask(t, devC, p)
		p.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
		streamed, _ := fromStream(t, devC.Chat.Completions.NewStreaming(ctx, p))
		if diff := cmp.Diff(a, streamed); diff != "" {
			t.Errorf("seeded: streamed differs (-non-streamed +streamed):\n%s", diff)
		}
		p.Seed, p.StreamOptions = oai.Int(8), oai.ChatCompletionStreamOptionsParam{}
		if b := ask(t, devC, p); cmp.Equal(a, b) && a.Completion > 4 {
			t.Errorf("seeds 7 and 8 answered the same: %+v", a)
		}
	})
}
