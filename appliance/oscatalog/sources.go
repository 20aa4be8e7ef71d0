package oscatalog

import (
	"fmt"
	"net/url"
	"path"

	"github.com/rollcall/rollcall/store"
)

// Source is one entry of os_sources in rollcall.json: where a name's
// images come from upstream.
type Source struct {
	Name string `json:"name"`
	// URL is the vendor's "latest" image (qcow2 or raw).
	URL string `json:"url"`
	// ChecksumURL is the vendor's checksum file listing the image by its
	// file name: GNU style ("hex  file", "hex *file") or BSD style
	// ("SHA256 (file) = hex").
	ChecksumURL string `json:"checksum_url"`
	Family      string `json:"family,omitempty"` // debian, rhel
	Track       string `json:"track,omitempty"`  // latest (default), pinned
}

// DefaultSources is os_sources when rollcall.json has none: the five
// vendor images the spec names, each with the vendor's own checksum file.
var DefaultSources = []Source{
	{Name: "debian-13", Family: store.FamilyDebian,
		URL:         "https://cloud.debian.org/images/cloud/trixie/latest/debian-13-genericcloud-amd64.qcow2",
		ChecksumURL: "https://cloud.debian.org/images/cloud/trixie/latest/SHA512SUMS"},
	{Name: "ubuntu-24.04", Family: store.FamilyDebian,
		URL:         "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
		ChecksumURL: "https://cloud-images.ubuntu.com/noble/current/SHA256SUMS"},
	{Name: "rocky-9", Family: store.FamilyRHEL,
		URL:         "https://dl.rockylinux.org/pub/rocky/9/images/x86_64/Rocky-9-GenericCloud-Base.latest.x86_64.qcow2",
		ChecksumURL: "https://dl.rockylinux.org/pub/rocky/9/images/x86_64/CHECKSUM"},
	{Name: "almalinux-9", Family: store.FamilyRHEL,
		URL:         "https://repo.almalinux.org/almalinux/9/cloud/x86_64/images/AlmaLinux-9-GenericCloud-latest.x86_64.qcow2",
		ChecksumURL: "https://repo.almalinux.org/almalinux/9/cloud/x86_64/images/CHECKSUM"},
	{Name: "centos-stream-9", Family: store.FamilyRHEL,
		URL:         "https://cloud.centos.org/centos/9-stream/x86_64/images/CentOS-Stream-GenericCloud-9-latest.x86_64.qcow2",
		ChecksumURL: "https://cloud.centos.org/centos/9-stream/x86_64/images/CHECKSUM"},
}

// CheckSources checks os_sources: names valid and once each, http(s) URLs
// without credentials, a known family and track.
func CheckSources(ss []Source) error {
	seen := map[string]bool{}
	for i, s := range ss {
		if err := store.ValidOSName(s.Name); err != nil {
			return fmt.Errorf("os_sources[%d]: %s", i, store.Public(err))
		}
		if seen[s.Name] {
			return fmt.Errorf("os_sources: %s is listed twice", s.Name)
		}
		seen[s.Name] = true
		for _, u := range []struct{ key, v string }{{"url", s.URL}, {"checksum_url", s.ChecksumURL}} {
			if err := checkURL(u.v); err != nil {
				return fmt.Errorf("os_sources[%s].%s: %w", s.Name, u.key, err)
			}
		}
		if err := store.ValidOSFamily(s.Family); err != nil {
			return fmt.Errorf("os_sources[%s]: %s", s.Name, store.Public(err))
		}
		if err := store.ValidOSTrack(s.Track); err != nil {
			return fmt.Errorf("os_sources[%s]: %s", s.Name, store.Public(err))
		}
	}
	return nil
}

// checkURL accepts an absolute http or https URL that names a file and
// carries no user:password (it would reach records and logs).
func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || s == "":
		return fmt.Errorf("%q is not a URL", store.Clip(s))
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: only http and https URLs are fetched", store.Clip(s))
	case u.Host == "":
		return fmt.Errorf("%q has no host", store.Clip(s))
	case u.User != nil:
		return fmt.Errorf("a URL with user:password@ is refused: it would be stored and logged")
	case len(s) > 2048:
		return fmt.Errorf("URL longer than 2048 bytes")
	case path.Base(u.Path) == "/" || path.Base(u.Path) == ".":
		return fmt.Errorf("%q names no file", store.Clip(s))
	}
	return nil
}

// CheckURL is checkURL for the API: an import from a URL.
func CheckURL(s string) error { return checkURL(s) }

// fileName is the last path segment of a URL, as checksum files name it.
func fileName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return path.Base(u.Path)
}
