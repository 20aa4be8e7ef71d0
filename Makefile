# Rollcall. `make run` starts a single-node appliance; `make test` checks everything.
GO       ?= go
BIN      := bin/rollcall
PKGS     := ./...
GOFLAGS_BUILD := -trimpath -ldflags="-s -w"

.PHONY: all build run test unit e2e e2e-full e2e-iso e2e-versions bench lint fmt-check vet fuzz clean image image-compute deploy-image iso

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

# End-to-end: real rollcall processes forming a cluster, killed and restarted;
# emulated machines commissioned, deployed and released (TestVMDeploy takes
# about ten minutes under TCG on a loaded machine).
e2e: build image deploy-image stateless-image
	$(GO) test -count=1 -timeout 40m -tags e2e -run . ./lab/e2e/
	$(MAKE) e2e-iso

# The appliance ISO booted under TCG (SeaBIOS from a CD, OVMF with Secure
# Boot from a USB stick) with unattended answers, up to its API: about two
# minutes, build included, so it is part of make e2e.
e2e-iso: image
	$(GO) test -count=1 -timeout 20m -tags e2e_iso -run TestBootISO -v ./buildroot/

# A rolling upgrade from the last build before the version gate (built
# from this checkout's history in a git worktree) to this one and back,
# under write load (lab/e2e/versions_test.go): part of make e2e, alone
# here. It needs main's history (.ci/run deepens a shallow clone). About
# two minutes.
e2e-versions:
	$(GO) test -count=1 -timeout 20m -tags e2e -run TestRollingUpgradeAcrossTheGate -v ./lab/e2e/

# The slow end-to-end tests, not part of `make test`: a Debian root with the
# real cloud-init (mmdebstrap from Debian's packages, a few minutes, cached
# in bin/deploy-image) deployed and booted under SeaBIOS and OVMF.
E2E_FULL_RUN ?= TestDeployDebianCloudInit|TestDeployDebianViaRollcall
e2e-full: build image deploy-image
	$(GO) run ./lab/deployimage/cmd/deploy-image -debian -out bin/deploy-image/debian
	$(GO) test -count=1 -timeout 60m -tags e2e,e2e_full -run '$(E2E_FULL_RUN)' -v ./lab/e2e/

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
	$(GO) test -run '^$$' -fuzz FuzzImportBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzTagBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./store/locationcsv/
	$(GO) test -run '^$$' -fuzz FuzzRequest -fuzztime 30s ./tftp/
	$(GO) test -run '^$$' -fuzz FuzzHandle -fuzztime 30s ./dhcp/
	$(GO) test -run '^$$' -fuzz FuzzAppendPacket -fuzztime 30s ./dhcp/wire/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRecords -fuzztime 30s ./store/
	$(GO) test -run '^$$' -fuzz FuzzDecodesAs -fuzztime 30s ./store/
	$(GO) test -run '^$$' -fuzz FuzzParseSMBIOS -fuzztime 30s ./agent/collect/
	$(GO) test -run '^$$' -fuzz FuzzParseLLDPFrame -fuzztime 30s ./agent/collect/
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 30s ./lab/deployimage/gpt/
	$(GO) test -run '^$$' -fuzz FuzzParseUserData -fuzztime 30s ./lab/deployimage/nocloud/
	$(GO) test -run '^$$' -fuzz FuzzParseChecksums -fuzztime 30s ./appliance/oscatalog/
	$(GO) test -run '^$$' -fuzz FuzzDetect -fuzztime 30s ./appliance/oscatalog/
	$(GO) test -run '^$$' -fuzz FuzzReadTable -fuzztime 30s ./agent/deploy/
	$(GO) test -run '^$$' -fuzz FuzzReadLVM -fuzztime 30s ./agent/deploy/
	$(GO) test -run '^$$' -fuzz FuzzLVMText -fuzztime 30s ./agent/deploy/
	$(GO) test -run '^$$' -fuzz FuzzParseBootCSV -fuzztime 30s ./agent/deploy/
	$(GO) test -run '^$$' -fuzz FuzzUserData -fuzztime 30s ./appliance/deploy/
	$(GO) test -run '^$$' -fuzz FuzzProgressBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzOverlayBody -fuzztime 30s ./appliance/httpapi/
	$(GO) test -run '^$$' -fuzz FuzzGlob -fuzztime 30s ./agent/sysinit/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./buildroot/grubenv/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./buildroot/initsys/
	$(GO) test -run '^$$' -fuzz FuzzParseNode -fuzztime 30s ./appliance/boottoken/

clean:
	rm -rf bin

# The commissioning image in bin/image: Debian's kernel (apt-get download +
# dpkg-deb -x), and an initrd with the agent as /init and the kernel modules
# it needs. Reproducible; prints its size.
image:
	$(GO) run ./images/commissioning/build -out bin/image

# The stateless compute image in bin/image-compute (images/compute-debian13):
# Debian 13 from Debian's packages (mmdebstrap, as root) with slurmd, munge,
# rdma-core, the NFS client, sshd and rollcall-overlay's units, as vmlinuz,
# Rollcall's initrd.img and filesystem.squashfs with SHA256SUMS, for
# `rollcall image import compute-debian13 -kernel … -initrd … -squashfs …`.
# About a minute here (52 s cold on 2 cores: mmdebstrap 35 s, mksquashfs 15 s;
# the .deb files stay in bin/image-compute/debs), 171 MB in all. Reproducible
# with SOURCE_DATE_EPOCH as far as mmdebstrap allows (two builds, same bytes); not
# part of make test.
image-compute:
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./images/compute-debian13 -out bin/image-compute

# The appliance ISO in bin/iso/rollcall.iso (buildroot): hybrid BIOS/UEFI,
# Debian's kernel and signed shim/GRUB, the driver set, rollcall-init as
# PID 1, rollcall, the commissioning image and iPXE. Reproducible with
# SOURCE_DATE_EPOCH (default: the last commit's time); prints what it
# holds per driver class and its size. Unattended answers for a fleet:
# make iso ISO_APPEND='rollcall.setup=name=rc1,addr=dhcp'.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
ISO_APPEND ?=
iso: image
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./buildroot/cmd/build-iso -out bin/iso/rollcall.iso -commissioning bin/image -append '$(ISO_APPEND)'

# The stateless test image's root (lab/statelessimage): a squashfs of a few
# MiB with testinit and rollcall-overlay, booted with bin/image's kernel and
# initrd by TestStatelessBoot; built offline in seconds.
stateless-image:
	$(GO) run ./lab/statelessimage/cmd/stateless-image -out bin/stateless-image

# The deploy tests' disk image (lab/deployimage): GPT with BIOS boot, ESP and
# an ext4 root holding Debian's kernel and tinyinit, booting under SeaBIOS
# and OVMF; built offline, cached in bin/deploy-image by its inputs, linked
# as bin/deploy-image/tiny/disk.raw.
deploy-image:
	$(GO) run ./lab/deployimage/cmd/deploy-image -out bin/deploy-image/tiny
