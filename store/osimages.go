package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// OS images: the catalog of disk images a deployment writes. A name
// (debian-13, rocky-9) holds versions; each version is one raw disk image
// kept zstd-compressed as a content-addressed blob on every node (the
// blob store boot images use), with the hashes of both forms and where it
// came from. Current names the version new deployments use.

var bucketOSImages = []byte("os_images") // made on first write, as tags'

// TableOSImages names the OS image table for blocking queries.
const TableOSImages = "os_images"

// TableDeployJobs names the deploy and release jobs' table (records in
// deployjobs.go) for blocking queries.
const TableDeployJobs = "deploy_jobs"

// OS families: what the deploy agent writes trust anchors and SELinux
// relabel markers for.
const (
	FamilyDebian = "debian"
	FamilyRHEL   = "rhel"
)

// OS tracking: "latest" moves Current to each new version a sync brings;
// "pinned" keeps Current until an operator promotes one.
const (
	TrackLatest = "latest"
	TrackPinned = "pinned"
)

// OSVersion is one imported version of an OS image.
type OSVersion struct {
	Version string `json:"version"` // e.g. 20261201-1 (sortable)
	// File is the compressed raw image (disk.raw.zst): its size and
	// SHA-256 name the blob.
	File ImageFile `json:"file"`
	// RawSize and RawSHA256 are of the raw image the agent writes.
	RawSize   int64  `json:"raw_size"`
	RawSHA256 string `json:"raw_sha256"`
	// SectorSize is the image's logical sector size (512 unless the image
	// says otherwise): a 4Kn disk refuses a 512-byte image.
	SectorSize int `json:"sector_size,omitempty"`
	// Upstream is the vendor's checksum of the file it was made from
	// ("sha256:…", "sha512:…"), empty for a local import.
	Upstream string `json:"upstream,omitempty"`
	// Source is the URL or file name it was made from (no credentials).
	Source   string    `json:"source,omitempty"`
	Format   string    `json:"format,omitempty"` // of the source: qcow2, raw
	Imported time.Time `json:"imported"`
	// Nodes hold a verified copy of File.
	Nodes []string `json:"nodes,omitempty"`
}

// OSImage is one name of the catalog.
type OSImage struct {
	Name     string      `json:"name"`
	Family   string      `json:"family,omitempty"` // debian, rhel
	Track    string      `json:"track,omitempty"`  // latest (default), pinned
	Current  string      `json:"current,omitempty"`
	Versions []OSVersion `json:"versions,omitempty"` // oldest first
	Index    uint64      `json:"index"`
}

// Version returns the named version, or Current when v is empty.
func (o OSImage) Version(v string) (OSVersion, bool) {
	if v == "" {
		v = o.Current
	}
	for _, x := range o.Versions {
		if x.Version == v {
			return x, true
		}
	}
	return OSVersion{}, false
}

var osVersionPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._+-]{0,62}[A-Za-z0-9])?$`)

// ValidOSVersion checks a version string: it becomes a URL segment and a
// directory in exports, so it is a short label.
func ValidOSVersion(s string) error {
	if !osVersionPattern.MatchString(s) {
		return Errorf(ErrInvalid, "OS version %q must be letters, digits, '.', '_', '+' or '-' (1 to 64)", Clip(s))
	}
	return nil
}

// OSImage returns one name of the catalog.
func (t *Tx) OSImage(name string) (OSImage, error) {
	return getNamed[OSImage](t, bucketOSImages, "OS image", name)
}

// OSImages lists the catalog by name.
func (t *Tx) OSImages() ([]OSImage, error) { return listNamed[OSImage](t, bucketOSImages) }

// PutOSImage writes one name of the catalog.
func (t *Tx) PutOSImage(o OSImage) error {
	o.Index = t.Index
	return t.putNamed(bucketOSImages, TableOSImages, o.Name, o)
}

// DeleteOSImage removes one name of the catalog.
func (t *Tx) DeleteOSImage(name string) error {
	return t.deleteNamed(bucketOSImages, TableOSImages, "OS image", name)
}

// ValidOSName checks a catalog name (debian-13, rocky-9): a lowercase
// label, as boot image names are.
func ValidOSName(s string) error {
	if err := ValidImageName(s); err != nil {
		return Errorf(ErrInvalid, "OS image name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63, not starting with a dot)", Clip(s))
	}
	return nil
}

// ValidOSFamily checks a family: debian, rhel, or empty (unknown).
func ValidOSFamily(s string) error {
	switch s {
	case "", FamilyDebian, FamilyRHEL:
		return nil
	}
	return Errorf(ErrInvalid, "OS family %q is not one of %s, %s", Clip(s), FamilyDebian, FamilyRHEL)
}

// ValidOSTrack checks a track: latest, pinned, or empty (latest).
func ValidOSTrack(s string) error {
	switch s {
	case "", TrackLatest, TrackPinned:
		return nil
	}
	return Errorf(ErrInvalid, "OS track %q is not one of %s, %s", Clip(s), TrackLatest, TrackPinned)
}

// deployJobRef is what the catalog reads of a deploy job (the record is
// deployjobs.go's): only the fields the contract between the two fixes.
type deployJobRef struct {
	ID        string `json:"id"`
	Machine   string `json:"machine"`
	Kind      string `json:"kind"`
	OS        string `json:"os"`
	OSVersion string `json:"os_version"`
	State     string `json:"state"`
}

// OSVersionInUse returns the ID of a deploy job, queued or running, that
// writes the version (any version of the name when version is empty), or
// "" when none does. The jobs' bucket may not exist yet.
func (t *Tx) OSVersionInUse(name, version string) (jobID string, err error) {
	b := t.tx.Bucket(bucketDeployJobs)
	if b == nil {
		return "", nil
	}
	err = b.ForEach(func(k, v []byte) error {
		if jobID != "" || v == nil {
			return nil
		}
		var j deployJobRef
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("decode %s/%s: %w", bucketDeployJobs, k, err)
		}
		if j.OS == name && (version == "" || j.OSVersion == version) && (j.State == "queued" || j.State == "running") {
			jobID = j.ID
		}
		return nil
	})
	return jobID, err
}

// OSSync is the catalog's sync state, one record: which node last started
// a sync and until when it holds it. A node starts a sync only through the
// state machine (raftfsm.OSSyncStart), which refuses while another node
// holds it, and a timed one while the last start is younger than the
// interval: a leader change never starts a second.
type OSSync struct {
	Node    string    `json:"node,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Until is when the holder's claim lapses (a node that died mid-sync
	// holds it no longer); a finished sync sets it to its end.
	Until    time.Time `json:"until,omitzero"`
	Timer    bool      `json:"timer,omitempty"` // started by the nightly timer
	Finished time.Time `json:"finished,omitzero"`
	// Result is what the last finished sync did, one line per name; Error
	// why it failed (public text), empty when it did not.
	Result []string `json:"result,omitempty"`
	Error  string   `json:"error,omitempty"`
	Index  uint64   `json:"index"`
}

// Running reports whether a sync holds the claim at now.
func (s OSSync) Running(now time.Time) bool {
	return s.Node != "" && s.Finished.Before(s.Started) && now.Before(s.Until)
}

var bucketOSSync = []byte("os_sync") // made on first write

const osSyncKey = "sync"

// OSSyncState returns the sync state; the zero value before the first sync.
func (t *Tx) OSSyncState() (OSSync, error) {
	s, err := getNamed[OSSync](t, bucketOSSync, "OS sync", osSyncKey)
	if errors.Is(err, ErrNotFound) {
		return OSSync{}, nil
	}
	return s, err
}

// PutOSSyncState writes the sync state (a change of the OS table, so a
// blocking query on the catalog sees a sync start and end).
func (t *Tx) PutOSSyncState(s OSSync) error {
	s.Index = t.Index
	if err := t.ensureBuckets(bucketOSSync); err != nil {
		return err
	}
	if err := t.putJSON(bucketOSSync, osSyncKey, s); err != nil {
		return err
	}
	if err := t.logChange("os_sync", osSyncKey, OpPut); err != nil {
		return err
	}
	return t.touch(TableOSImages)
}
