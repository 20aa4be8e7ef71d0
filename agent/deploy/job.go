package deploy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Job is the answer to GET /api/v1/jobs/self: what the server wants this
// machine to do. The agent reads it, never stores it.
type Job struct {
	ID             string  `json:"id"`
	Machine        string  `json:"machine"`
	Kind           string  `json:"kind"` // KindDeploy or KindRelease
	Image          Image   `json:"image"`
	Disk           DiskRef `json:"disk"`
	Wipe           string  `json:"wipe,omitempty"` // release jobs: WipeQuick or WipeFull
	Seed           Seed    `json:"seed"`
	CAPEM          string  `json:"ca_pem,omitempty"`    // the cluster CA, written into the trust anchors
	EFILabel       string  `json:"efi_label,omitempty"` // description of the UEFI boot entry
	SELinuxRelabel bool    `json:"selinux_relabel,omitempty"`
}

// Job kinds and release wipe modes.
const (
	KindDeploy  = "deploy"
	KindRelease = "release"
	WipeQuick   = "quick"
	WipeFull    = "full"
)

// Image is the OS image a deploy job writes.
type Image struct {
	URL        string `json:"url"`        // "/os/blobs/<sha256>" on the same server, or an absolute URL
	SHA256     string `json:"sha256"`     // of the file as served (compressed)
	Size       int64  `json:"size"`       // compressed bytes
	RawSHA256  string `json:"raw_sha256"` // of the raw disk image
	RawSize    int64  `json:"raw_size"`
	Format     string `json:"format"`      // "raw+zstd"; the magic bytes decide in the end
	SectorSize int    `json:"sector_size"` // logical sector size the image's partition table was made for
}

// DiskRef names the target disk as the server saw it at commissioning.
// Serial and WWN are stable; Name ("sda") is not and is used only when the
// disk has neither.
type DiskRef struct {
	Serial string `json:"serial,omitempty"`
	WWN    string `json:"wwn,omitempty"`
	Name   string `json:"name,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// Seed is the NoCloud seed written into the deployed root.
type Seed struct {
	MetaData      string `json:"meta-data"`
	UserData      string `json:"user-data"`
	NetworkConfig string `json:"network-config,omitempty"`
	// UdevRules, when given, are written at UdevRulesPath (an absolute
	// path under /etc/udev/rules.d) in the deployed root.
	UdevRules     string `json:"udev-rules,omitempty"`
	UdevRulesPath string `json:"udev-rules-path,omitempty"`
}

// Progress is the body of POST /api/v1/jobs/self/progress.
type Progress struct {
	Step    string `json:"step"`
	State   string `json:"state"` // StateRunning, StateDone or StateFailed
	Bytes   int64  `json:"bytes,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// ProgressReply is the server's answer to a progress report.
type ProgressReply struct {
	Cancel bool `json:"cancel"`
}

// Steps, in the order a deploy runs them, and step states.
const (
	StepWipe       = "wipe"
	StepDownload   = "download"
	StepWrite      = "write"
	StepVerify     = "verify"
	StepPartitions = "partitions"
	StepGPT        = "gpt"
	StepRoot       = "root"
	StepSeed       = "seed"
	StepTrust      = "trust"
	StepEFI        = "efi"
	StepDone       = "done"
	StepWipeFull   = "wipe-full"

	StateRunning = "running"
	StateDone    = "done"
	StateFailed  = "failed"
)

// Bounds on what a job may carry: a job comes from the server over a
// pinned TLS channel, but the agent still never trusts a size it is told.
const (
	maxSeedPart = 1 << 20   // one seed file
	maxCAPEM    = 256 << 10 // the CA bundle
	maxLabel    = 128       // UEFI description, in characters
)

// Validate checks a job before anything is touched, so a bad one fails
// with its reason and changes nothing.
func (j *Job) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if j.ID == "" {
		bad("job has no id")
	}
	if j.Disk.Serial == "" && j.Disk.WWN == "" && j.Disk.Name == "" {
		bad("job names no disk (serial, wwn or name)")
	}
	switch j.Kind {
	case KindDeploy:
		im := j.Image
		if im.URL == "" {
			bad("image has no url")
		}
		if !isSHA256(im.SHA256) {
			bad("image sha256 %q is not 64 hex digits", clip(im.SHA256))
		}
		if !isSHA256(im.RawSHA256) {
			bad("image raw_sha256 %q is not 64 hex digits", clip(im.RawSHA256))
		}
		if im.Size <= 0 || im.RawSize <= 0 {
			bad("image size %d / raw_size %d: both must be positive", im.Size, im.RawSize)
		}
		switch im.SectorSize {
		case 0, 512, 4096:
		default:
			bad("image sector_size %d: want 512 or 4096", im.SectorSize)
		}
		if ss := int64(j.sectorSize()); im.RawSize%ss != 0 {
			bad("image raw_size %d is not a whole number of %d-byte sectors", im.RawSize, ss)
		}
		if j.Seed.MetaData == "" || j.Seed.UserData == "" {
			// cloud-init's ds-identify finds NoCloud only with both files.
			bad("seed needs both meta-data and user-data")
		}
		for name, v := range map[string]string{"meta-data": j.Seed.MetaData, "user-data": j.Seed.UserData, "network-config": j.Seed.NetworkConfig, "udev-rules": j.Seed.UdevRules} {
			if len(v) > maxSeedPart {
				bad("seed %s is %d bytes: at most %d", name, len(v), maxSeedPart)
			}
		}
		if j.Seed.UdevRules != "" && !validUdevPath(j.Seed.UdevRulesPath) {
			bad("seed udev-rules-path %q: want a .rules file directly in /etc/udev/rules.d", clip(j.Seed.UdevRulesPath))
		}
		if len(j.CAPEM) > maxCAPEM {
			bad("ca_pem is %d bytes: at most %d", len(j.CAPEM), maxCAPEM)
		}
		if n := len([]rune(j.EFILabel)); n > maxLabel {
			bad("efi_label is %d characters: at most %d", n, maxLabel)
		}
	case KindRelease:
		switch j.Wipe {
		case "", WipeQuick, WipeFull:
		default:
			bad("wipe %q: want %s or %s", clip(j.Wipe), WipeQuick, WipeFull)
		}
	default:
		bad("job kind %q: want %s or %s", clip(j.Kind), KindDeploy, KindRelease)
	}
	return errors.Join(errs...)
}

func (j *Job) sectorSize() int {
	if j.Image.SectorSize == 0 {
		return 512
	}
	return j.Image.SectorSize
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// clip keeps a value quoted back in an error short.
func clip(s string) string {
	if len(s) > 70 {
		return s[:70] + "…"
	}
	return s
}

// eqHex compares two hex digests, case ignored.
func eqHex(a, b string) bool { return strings.EqualFold(a, b) }
