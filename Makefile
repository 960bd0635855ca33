# aimac / aima-engine. `make test` is the command CI runs (.ci/run).
GO      ?= go
BIN     ?= bin
DEMO    ?= $(BIN)/demo-tiny

.PHONY: build test lint demo fuzz clean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# lint: gofmt check and go vet.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: lint
	$(GO) test -count=1 ./...

# demo: synthesize the tiny model and generate with it on the CPU backend.
demo: build
	rm -rf $(DEMO)
	$(BIN)/aimac synth --preset tiny --seed 1 --out $(DEMO)
	$(BIN)/aima-engine probe generate --model-dir $(DEMO) --tokens 1,2,3,4,5,6,7 --max-tokens 16

# fuzz: a short run of every fuzz target (FUZZTIME each).
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

clean:
	rm -rf $(BIN)
