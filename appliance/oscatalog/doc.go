// Package oscatalog fills the OS image catalog (issue 18; the spec's
// "Image catalog and freshness"): it syncs vendor cloud images from
// os_sources, imports an operator's qcow2 or raw image from a file or a
// URL, and prunes old versions.
//
// Every image takes the same road: download (bounded in size and time;
// never trusting a name for the format), verify against the vendor's
// checksum file when there is one, `qemu-img info` refusing a backing file
// or an external data file, `qemu-img convert -f qcow2 -O raw` (raw passes
// through), SHA-256 of the raw image, zstd, and into the node's blob store
// (appliance/bootfiles), then one raftfsm.OSVersionAdd, which also flips
// current. Image sync (bootfiles) brings the blob to every other node; a
// step that fails leaves the catalog as it was and no blob behind.
//
// Sync runs on the leader on a timer, and through a claim in the
// replicated store (raftfsm.OSSyncStart) never twice at once, nor again
// after a leader change before its interval has passed.
package oscatalog

// Not done yet (issue 18, h-oscatalog): the console's and the web UI's
// "OS images" pages, the os_images/os_versions tables of the PostgreSQL
// export, and the serving benchmark against nginx. The REST API and the
// CLI are complete.
