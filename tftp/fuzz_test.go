package tftp

import (
	"io/fs"
	"strings"
	"testing"
)

// FuzzRequest feeds arbitrary datagrams to the request parser and the name
// normaliser: neither may panic, and every name that survives both is a
// clean relative path (no "..", no leading slash, no backslash, no control
// character) that fs.ValidPath and os.Root accept without leaving the root.
// The seed corpus is in testdata/fuzz/FuzzRequest.
func FuzzRequest(f *testing.F) {
	f.Add(rrq("ipxe.efi", "octet"))
	f.Add(rrq("undionly.kpxe", "octet", "blksize", "1468", "tsize", "0"))
	f.Add(wrq("../etc/passwd"))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseRequest(b)
		if err != nil {
			return
		}
		if req.Name == "" || strings.IndexByte(req.Name, 0) >= 0 {
			t.Fatalf("parsed name %q", req.Name)
		}
		if req.Mode != "octet" && req.Mode != "netascii" {
			t.Fatalf("parsed mode %q", req.Mode)
		}
		if req.BlockSize != 0 && (req.BlockSize < minBlockSize || req.BlockSize > maxBlockSize) {
			t.Fatalf("blksize %d out of range", req.BlockSize)
		}
		name, err := cleanName(req.Name)
		if err != nil {
			return
		}
		if !fs.ValidPath(name) || name == "." || strings.ContainsAny(name, "\\\x00") {
			t.Fatalf("cleanName(%q) = %q escapes or is unclean", req.Name, name)
		}
		for _, el := range strings.Split(name, "/") {
			if el == ".." {
				t.Fatalf("cleanName(%q) = %q has ..", req.Name, name)
			}
		}
	})
}
