package oscatalog

import (
	"strings"
	"testing"
)

var (
	h64  = strings.Repeat("ab", 32)
	h128 = strings.Repeat("cd", 64)
)

// Each vendor's checksum file, in its own format (abridged from the real
// files' shapes).
var vendorFiles = map[string]struct {
	body, file string
	want       Sum
}{
	"debian SHA512SUMS (GNU, text mode)": {
		body: h128 + "  debian-13-genericcloud-amd64.json\n" + strings.Repeat("ef", 64) + "  debian-13-genericcloud-amd64.qcow2\n",
		file: "debian-13-genericcloud-amd64.qcow2", want: Sum{"sha512", strings.Repeat("ef", 64)},
	},
	"ubuntu SHA256SUMS (GNU, binary mode)": {
		body: h64 + " *noble-server-cloudimg-amd64.img\n" + strings.Repeat("01", 32) + " *noble-server-cloudimg-arm64.img\n",
		file: "noble-server-cloudimg-amd64.img", want: Sum{"sha256", h64},
	},
	"rocky CHECKSUM (BSD, comments)": {
		body: "# Rocky-9-GenericCloud-Base.latest.x86_64.qcow2: 609812480 bytes\nSHA256 (Rocky-9-GenericCloud-Base.latest.x86_64.qcow2) = " + strings.ToUpper(h64) + "\n",
		file: "Rocky-9-GenericCloud-Base.latest.x86_64.qcow2", want: Sum{"sha256", h64},
	},
	"centos CHECKSUM (BSD, PGP signed, CRLF)": {
		body: "-----BEGIN PGP SIGNED MESSAGE-----\r\nHash: SHA256\r\n\r\nSHA256 (CentOS-Stream-GenericCloud-9-latest.x86_64.qcow2) = " + h64 + "\r\n-----BEGIN PGP SIGNATURE-----\r\niQIzBAEBCAAdFiEE\r\n-----END PGP SIGNATURE-----\r\n",
		file: "CentOS-Stream-GenericCloud-9-latest.x86_64.qcow2", want: Sum{"sha256", h64},
	},
	"sha256 and sha512 of one file: the stronger": {
		body: "SHA256 (a.qcow2) = " + h64 + "\nSHA512 (a.qcow2) = " + h128 + "\nMD5 (a.qcow2) = " + strings.Repeat("0", 32) + "\n",
		file: "a.qcow2", want: Sum{"sha512", h128},
	},
	"a path in the file": {body: h64 + "  ./images/a.img\n", file: "a.img", want: Sum{"sha256", h64}},
}

func TestParseChecksums(t *testing.T) {
	for name, c := range vendorFiles {
		t.Run(name, func(t *testing.T) {
			sums, err := ParseChecksums([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := sums.Lookup(c.file)
			if !ok || got != c.want {
				t.Errorf("Lookup(%s) = %v, %v; want %v", c.file, got, ok, c.want)
			}
			if _, ok := sums.Lookup("other.qcow2"); ok {
				t.Error("a file the checksum file does not list was found")
			}
		})
	}
	for name, c := range map[string]struct{ body, says string }{
		"empty":              {"", "lists no SHA-256 or SHA-512"},
		"only md5":           {"MD5 (a.img) = " + strings.Repeat("0", 32) + "\n" + strings.Repeat("0", 32) + "  b.img\n", "lists no SHA-256"},
		"an HTML error page": {"<html><body>404 Not Found</body></html>", "lists no SHA-256"},
		"two sums, one file": {h64 + "  a.img\n" + strings.Repeat("11", 32) + "  a.img\n", "two different sha256"},
		"a short BSD sum":    {"SHA256 (a.img) = abcd\n", "a sha256 of 4 hex digits"},
		"too large":          {strings.Repeat("x", MaxChecksumFile+1), "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseChecksums([]byte(c.body))
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("got %v, want an error saying %q", err, c.says)
			}
		})
	}
}

// FuzzParseChecksums: a mirror's checksum file is hostile input: the
// parser never panics, and what it returns is well formed.
func FuzzParseChecksums(f *testing.F) {
	for _, c := range vendorFiles {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sums, err := ParseChecksums(b)
		if err != nil {
			return
		}
		for file, ss := range sums {
			if file == "" || len(ss) == 0 {
				t.Fatalf("entry %q with %d sums", file, len(ss))
			}
			for _, s := range ss {
				if len(s.Hex) != hexLen[s.Alg] || (s.Alg != "sha256" && s.Alg != "sha512") || strings.ToLower(s.Hex) != s.Hex {
					t.Fatalf("bad sum %+v for %q", s, file)
				}
			}
			if _, ok := sums.Lookup(file); !ok {
				t.Fatalf("listed file %q not found by Lookup", file)
			}
		}
	})
}
