package store

import (
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
