# Rollcall. `make run` starts a single-node appliance; `make test` checks everything.
GO       ?= go
BIN      := bin/rollcall
PKGS     := ./...
GOFLAGS_BUILD := -trimpath -ldflags="-s -w"

.PHONY: all build run test unit e2e bench lint fmt-check vet fuzz clean image iso

all: build

build:
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o $(BIN) ./appliance/cmd/rollcall

# A single-node appliance on its embedded default: data in ./var, API on :8080.
run: build
	./$(BIN) serve -data var -http 127.0.0.1:8080 -raft 127.0.0.1:8300

test: lint unit e2e

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -count=1 -timeout 20m $(PKGS)

# End-to-end: real rollcall processes forming a cluster, killed and restarted.
e2e: build image
	$(GO) test -count=1 -timeout 20m -tags e2e -run . ./lab/e2e/

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./raftfsm/ ./raftfsm/cluster/
	$(GO) run ./lab/bench/raft
	$(GO) run ./lab/bench/ipam
	$(GO) run ./lab/bench/tftp
	$(GO) run ./lab/bench/power
	$(GO) run ./lab/bench/export
	$(GO) run ./lab/bench/http

# Short fuzzing runs of every fuzz target (the seed corpora also run in `make unit`).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseJoinCode -fuzztime 30s ./appliance/pki/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s ./raftfsm/
	$(GO) test -run '^$$' -fuzz FuzzCreateMachineBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzCommissionBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzRequest -fuzztime 30s ./tftp/
	$(GO) test -run '^$$' -fuzz FuzzHandle -fuzztime 30s ./dhcp/
	$(GO) test -run '^$$' -fuzz FuzzAppendPacket -fuzztime 30s ./dhcp/wire/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRecords -fuzztime 30s ./store/
	$(GO) test -run '^$$' -fuzz FuzzParseSMBIOS -fuzztime 30s ./agent/collect/
	$(GO) test -run '^$$' -fuzz FuzzParseLLDPFrame -fuzztime 30s ./agent/collect/
	$(GO) test -run '^$$' -fuzz FuzzUserData -fuzztime 30s ./appliance/deploy/
	$(GO) test -run '^$$' -fuzz FuzzProgressBody -fuzztime 30s ./appliance/httpapi/

clean:
	rm -rf bin

# The commissioning image in bin/image: Debian's kernel (apt-get download +
# dpkg-deb -x), and an initrd with the agent as /init and the kernel modules
# it needs. Reproducible; prints its size.
image:
	$(GO) run ./images/commissioning/build -out bin/image
