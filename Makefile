# aimac / aima-engine. `make test` is the command CI runs (.ci/run).
GO      ?= go
BIN     ?= bin

.PHONY: build test lint demo fuzz clean testdata

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# lint: gofmt check and go vet.
lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# The gfx1151 compile check runs on its own, verbose, so CI prints every
# kernel's VGPRs, LDS and scratch against the budgets.
test: lint testdata
	$(GO) test -count=1 -timeout 40m -skip '^TestCompileGfx1151$$' ./...
	$(GO) test -count=1 -timeout 40m -v -run '^TestCompileGfx1151$$' ./codegen
	$(GO) test -count=1 -timeout 40m -race ./server/... ./runtime/...

# demo: serve a synthesized tiny model on the CPU backend and answer one request.
demo: build
	scripts/demo.sh $(BIN)

# testdata: reference files the tests need that are fetched, not committed.
testdata: tokenizer/testdata/qwen3/tokenizer.json

tokenizer/testdata/qwen3/tokenizer.json:
	tokenizer/testdata/fetch.sh

# fuzz: a short run of every fuzz target (FUZZTIME each, minimisation of a
# new input capped at FUZZMINIMIZETIME), printing each target's exec count.
FUZZTIME ?= 20s
FUZZMINIMIZETIME ?= 1s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) scripts/fuzz.sh

clean:
	rm -rf $(BIN)
