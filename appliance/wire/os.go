package wire

import "time"

// OSVersion is one version of an OS image in the catalog.
type OSVersion struct {
	Version string `json:"version"`
	// SHA256 and Size are of the compressed file (disk.raw.zst), which
	// GET /os/blobs/{sha256} serves.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// RawSHA256 and RawSize are of the raw disk image the agent writes.
	RawSHA256  string `json:"raw_sha256"`
	RawSize    int64  `json:"raw_size"`
	SectorSize int    `json:"sector_size,omitempty"`
	// Upstream is the vendor's checksum it was made from ("sha512:…"),
	// empty for an import.
	Upstream string    `json:"upstream,omitempty"`
	Source   string    `json:"source,omitempty"` // URL or file name
	Format   string    `json:"format,omitempty"` // of the source: qcow2, raw
	Imported time.Time `json:"imported"`
	Nodes    []string  `json:"nodes,omitempty"` // nodes holding a verified copy
	Current  bool      `json:"current,omitempty"`
}

// OSImage is one name of the catalog.
type OSImage struct {
	Name     string      `json:"name"`
	Family   string      `json:"family,omitempty"` // debian, rhel
	Track    string      `json:"track,omitempty"`  // latest (also when empty), pinned
	Current  string      `json:"current,omitempty"`
	Versions []OSVersion `json:"versions,omitempty"` // oldest first
	Index    uint64      `json:"index"`
}

// OSSync is the state of the catalog's sync: who last started one, and
// what the last finished one did.
type OSSync struct {
	Node     string    `json:"node,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Running  bool      `json:"running"`
	Timer    bool      `json:"timer,omitempty"`
	Finished time.Time `json:"finished,omitzero"`
	Result   []string  `json:"result,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// OSList is GET /api/v1/os.
type OSList struct {
	Index  uint64    `json:"index"` // the catalog's change index
	Images []OSImage `json:"images"`
	Sync   OSSync    `json:"sync"`
	// Nodes is how many nodes the cluster has: a version is everywhere
	// when len(nodes) reaches it.
	Nodes int `json:"nodes"`
	// Sources are the configured os_sources' names, which POST
	// /api/v1/os/sync takes.
	Sources []string `json:"sources"`
}

// OSSyncRequest is POST /api/v1/os/sync: some os_sources (all when Names
// is empty); Force downloads even an unchanged image.
type OSSyncRequest struct {
	Names []string `json:"names,omitempty"`
	Force bool     `json:"force,omitempty"`
}

// OSPromoteRequest is POST /api/v1/os/{name}/promote.
type OSPromoteRequest struct {
	Version string `json:"version"`
}

// OSProgress is one step's progress: download, verify, inspect, convert,
// compress, record, replicate (bytes and total are then nodes).
type OSProgress struct {
	Name    string `json:"name,omitempty"`
	Step    string `json:"step"`
	State   string `json:"state,omitempty"` // running, done, failed, skipped
	Bytes   int64  `json:"bytes,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// OSSyncResult is what a sync did for one name.
type OSSyncResult struct {
	Name     string   `json:"name"`
	Action   string   `json:"action"` // new, unchanged, failed
	Version  string   `json:"version,omitempty"`
	Upstream string   `json:"upstream,omitempty"`
	Current  bool     `json:"current,omitempty"`
	Pruned   []string `json:"pruned,omitempty"`
	Message  string   `json:"message,omitempty"`
	// Nodes holding a new version when the answer was written.
	Nodes []string `json:"nodes,omitempty"`
}

// OSResult ends a sync or an import: the names synced, or the version
// imported.
type OSResult struct {
	Sync    []OSSyncResult `json:"sync,omitempty"`
	Version *OSVersion     `json:"version,omitempty"`
	Name    string         `json:"name,omitempty"`
}

// OSStreamLine is one line of the NDJSON stream POST /api/v1/os/sync and
// POST /api/v1/os/{name}/import answer with (Content-Type
// application/x-ndjson): progress lines, then exactly one result or error
// line. A refusal before any work started is a plain error answer instead.
type OSStreamLine struct {
	Progress *OSProgress  `json:"progress,omitempty"`
	Result   *OSResult    `json:"result,omitempty"`
	Error    *ErrorDetail `json:"error,omitempty"`
}
