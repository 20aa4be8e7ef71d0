package oscatalog

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Vendors publish their checksums in one of two line formats:
//
//	GNU (sha256sum, sha512sum; Debian's SHA512SUMS, Ubuntu's SHA256SUMS):
//	    <hex>  <file>     text mode
//	    <hex> *<file>     binary mode
//	BSD (sha256sum --tag; Rocky's, AlmaLinux's, CentOS's CHECKSUM):
//	    SHA256 (<file>) = <hex>
//
// A file may be wrapped in an OpenPGP clear signature and carry comments
// ("# file: 123 bytes"). Only SHA-256 and SHA-512 count: MD5 and SHA-1
// lines are read and left out.

// MaxChecksumFile bounds a checksum file: vendors' are a few KiB.
const MaxChecksumFile = 1 << 20

// maxChecksumLines bounds the lines of one file.
const maxChecksumLines = 20000

// Sum is one checksum: the algorithm (sha256, sha512) and lowercase hex.
type Sum struct {
	Alg, Hex string
}

// String is the form OSVersion.Upstream keeps: "sha256:hex".
func (s Sum) String() string { return s.Alg + ":" + s.Hex }

// Checksums are a checksum file's entries by file name.
type Checksums map[string][]Sum

var (
	bsdLine = regexp.MustCompile(`^(SHA256|SHA512|SHA1|MD5|SHA384|SHA224) ?\((.+)\) ?= ?([0-9A-Fa-f]+)$`)
	gnuLine = regexp.MustCompile(`^([0-9A-Fa-f]{32,128}) [ *](.+)$`)
	hexLen  = map[string]int{"sha256": 64, "sha512": 128, "sha1": 40, "md5": 32, "sha384": 96, "sha224": 56}
)

// ParseChecksums reads a checksum file in either format. It fails on a
// file with no usable entry, one past MaxChecksumFile, or one that gives a
// file two different checksums of the same algorithm.
func ParseChecksums(b []byte) (Checksums, error) {
	if len(b) > MaxChecksumFile {
		return nil, fmt.Errorf("checksum file larger than %d KiB", MaxChecksumFile>>10)
	}
	out := Checksums{}
	inSig := false
	for i, line := range bytes.Split(b, []byte("\n")) {
		if i >= maxChecksumLines {
			return nil, fmt.Errorf("checksum file has more than %d lines", maxChecksumLines)
		}
		l := strings.TrimSpace(string(line))
		switch {
		case l == "-----BEGIN PGP SIGNATURE-----":
			inSig = true
			continue
		case l == "-----END PGP SIGNATURE-----":
			inSig = false
			continue
		case inSig, l == "", strings.HasPrefix(l, "#"), strings.HasPrefix(l, "-----"), strings.HasPrefix(l, "Hash:"):
			continue
		}
		var alg, file, sum string
		if m := bsdLine.FindStringSubmatch(l); m != nil {
			alg, file, sum = strings.ToLower(m[1]), m[2], strings.ToLower(m[3])
			if len(sum) != hexLen[alg] {
				return nil, fmt.Errorf("checksum file line %d: a %s of %d hex digits", i+1, alg, len(sum))
			}
		} else if m := gnuLine.FindStringSubmatch(l); m != nil {
			sum, file = strings.ToLower(m[1]), m[2]
			switch len(sum) {
			case 64:
				alg = "sha256"
			case 128:
				alg = "sha512"
			default:
				continue // md5, sha1 or unknown
			}
		} else {
			continue
		}
		if alg != "sha256" && alg != "sha512" {
			continue
		}
		file = strings.TrimPrefix(file, "./")
		if file == "" || strings.ContainsAny(file, "\x00") {
			continue
		}
		s := Sum{Alg: alg, Hex: sum}
		dup := false
		for _, have := range out[file] {
			if have.Alg == alg && have.Hex != sum {
				return nil, fmt.Errorf("checksum file gives %s two different %s sums", clipName(file), alg)
			}
			dup = dup || have == s
		}
		if !dup {
			out[file] = append(out[file], s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("checksum file lists no SHA-256 or SHA-512 sum")
	}
	return out, nil
}

// Lookup returns the strongest sum listed for the file (by its name, or
// by the name's last path segment).
func (c Checksums) Lookup(file string) (Sum, bool) {
	sums := c[file]
	if len(sums) == 0 {
		for _, name := range slices.Sorted(maps.Keys(c)) {
			if path.Base(name) == file {
				sums = c[name]
				break
			}
		}
	}
	var best Sum
	for _, s := range sums {
		if best.Alg == "" || s.Alg == "sha512" {
			best = s
		}
	}
	return best, best.Alg != ""
}

func clipName(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}
