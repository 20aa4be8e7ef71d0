package tftp

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// FuzzRequest feeds arbitrary datagrams to the request parser and the name
// normaliser: neither may panic, what the parser accepts is within its
// bounds (option values, name length, option count), and every name that
// survives both is a clean relative path (no "..", no leading slash, no
// backslash, no control character) that fs.ValidPath and os.Root accept
// without leaving the root.
// The seed corpus is in testdata/fuzz/FuzzRequest.
func FuzzRequest(f *testing.F) {
	f.Add(rrq("ipxe.efi", "octet"))
	f.Add(rrq("undionly.kpxe", "octet", "blksize", "1468", "tsize", "0"))
	f.Add(wrq("../etc/passwd"))
	f.Add(rrq("ipxe.efi", "octet", "timeout", "255", "windowsize", "65535"))
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
		if req.Timeout != 0 && (req.Timeout < time.Second || req.Timeout > 255*time.Second) {
			t.Fatalf("timeout %s out of range", req.Timeout)
		}
		if len(req.Name) > maxNameLen || bytes.Count(b[2:], []byte{0}) > 2+2*maxOptions {
			t.Fatalf("accepted a name of %d bytes or more than %d options", len(req.Name), maxOptions)
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
