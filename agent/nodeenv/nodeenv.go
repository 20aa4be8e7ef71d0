// Package nodeenv holds a stateless node's settings: what the boot answer
// puts on the kernel command line (rollcall.server=, rollcall.tls=,
// rollcall.ca=, rollcall.node=, rollcall.root=, rollcall.root_sha256=,
// rollcall.init=, rollcall.refresh=, hostname=) and the file the initrd
// leaves in the new root for the node's own tools, /run/rollcall/node.env
// (KEY=value lines, as systemd's EnvironmentFile= reads them). The
// initrd's stateless mode (agent/stateless) and the overlay client
// (agent/cmd/rollcall-overlay) both read it; it is a leaf of the standard
// library only, so the client stays small.
package nodeenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Path is where the initrd writes the settings in the new root (mode 0600:
// the node token is a secret).
const Path = "/run/rollcall/node.env"

// DefaultInit is what the initrd executes in the new root without
// rollcall.init=.
const DefaultInit = "/sbin/init"

// MaxRefresh bounds rollcall.refresh= (a day).
const MaxRefresh = 86400

// Config is a stateless node's settings.
type Config struct {
	Server     string // rollcall.server=: plain HTTP base URL of the appliance
	TLS        string // rollcall.tls=: HTTPS base URL, checked against CA
	CA         string // rollcall.ca=: SHA-256 (hex) of the CA certificate's DER
	Node       string // rollcall.node=: the node token (X-Rollcall-Node)
	Root       string // rollcall.root=: URL of the image's squashfs
	RootSHA256 string // rollcall.root_sha256=: its SHA-256, hex
	Init       string // rollcall.init=: the new root's init (default DefaultInit)
	Hostname   string // hostname=
	Refresh    int    // rollcall.refresh=: seconds between runtime refreshes (0: the appliance's)
}

// ParseCmdline reads the settings from a kernel command line; words it
// does not know are the kernel's, or the commissioning agent's.
func ParseCmdline(cmdline string) (Config, error) {
	var c Config
	var errs []error
	for _, w := range SplitCmdline(cmdline) {
		k, v, _ := strings.Cut(w, "=")
		if err := c.set(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// set assigns one setting by its kernel argument name.
func (c *Config) set(k, v string) error {
	switch k {
	case "rollcall.server":
		c.Server = v
	case "rollcall.tls":
		c.TLS = v
	case "rollcall.ca":
		c.CA = v
	case "rollcall.node":
		c.Node = v
	case "rollcall.root":
		c.Root = v
	case "rollcall.root_sha256":
		c.RootSHA256 = strings.ToLower(v)
	case "rollcall.init":
		c.Init = v
	case "hostname":
		c.Hostname = v
	case "rollcall.refresh":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRefresh {
			return fmt.Errorf("rollcall.refresh=%q: want seconds between 1 and %d", v, MaxRefresh)
		}
		c.Refresh = n
	}
	return nil
}

// keys maps node.env's variables to the kernel arguments they carry.
var keys = []struct{ env, arg string }{
	{"ROLLCALL_SERVER", "rollcall.server"},
	{"ROLLCALL_TLS", "rollcall.tls"},
	{"ROLLCALL_CA", "rollcall.ca"},
	{"ROLLCALL_NODE", "rollcall.node"},
	{"ROLLCALL_HOSTNAME", "hostname"},
	{"ROLLCALL_REFRESH", "rollcall.refresh"},
}

func (c Config) value(arg string) string {
	switch arg {
	case "rollcall.server":
		return c.Server
	case "rollcall.tls":
		return c.TLS
	case "rollcall.ca":
		return c.CA
	case "rollcall.node":
		return c.Node
	case "hostname":
		return c.Hostname
	case "rollcall.refresh":
		if c.Refresh > 0 {
			return strconv.Itoa(c.Refresh)
		}
	}
	return ""
}

// Env is node.env's content: what the node's tools need (the appliance,
// the CA pin, the token, the name, the refresh), not the boot-only
// settings. Values are plain words (URLs, hex, tokens); one that is not is
// left out rather than written half-quoted.
func (c Config) Env() []byte {
	var b bytes.Buffer
	b.WriteString("# Written by the Rollcall initrd (stateless mode). Secret: the node token.\n")
	for _, k := range keys {
		v := c.value(k.arg)
		if v == "" || !plainWord(v) {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", k.env, v)
	}
	return b.Bytes()
}

// ParseEnv reads node.env. Unknown variables are ignored; a line that is
// not KEY=value is an error.
func ParseEnv(data []byte) (Config, error) {
	var c Config
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("node.env line %d: not KEY=value", n))
			continue
		}
		v = strings.Trim(v, `"`)
		for _, key := range keys {
			if key.env == k {
				if err := c.set(key.arg, v); err != nil {
					errs = append(errs, fmt.Errorf("node.env line %d: %w", n, err))
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("node.env: %w", err))
	}
	return c, errors.Join(errs...)
}

func plainWord(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == '$' || r == '`' || r == 0x7f {
			return false
		}
	}
	return true
}

// CheckClient checks what the overlay client needs: the appliance's
// address (and the CA pin with TLS) and the node token.
func (c Config) CheckClient() error {
	var errs []error
	if !httpURL(c.Server, "http", "https") {
		errs = append(errs, fmt.Errorf("rollcall.server=%q: need an http:// URL of the appliance", c.Server))
	}
	if c.TLS != "" {
		if !httpURL(c.TLS, "https") {
			errs = append(errs, fmt.Errorf("rollcall.tls=%q: need an https:// URL", c.TLS))
		}
		if !isHex(strings.ReplaceAll(strings.TrimPrefix(c.CA, "sha256:"), ":", ""), 64) {
			errs = append(errs, fmt.Errorf("rollcall.ca=%q: rollcall.tls= needs the CA's SHA-256 fingerprint (64 hex digits)", c.CA))
		}
	}
	if c.Node == "" {
		errs = append(errs, errors.New("rollcall.node= is missing: the node token the appliance gave at assign"))
	}
	return errors.Join(errs...)
}

// CheckBoot checks what the initrd needs on top: the root's URL and
// checksum, and an init path.
func (c Config) CheckBoot() error {
	errs := []error{c.CheckClient()}
	if !httpURL(c.Root, "http", "https") {
		errs = append(errs, fmt.Errorf("rollcall.root=%q: need an http:// URL of the image's squashfs", c.Root))
	}
	if !isHex(c.RootSHA256, 64) {
		errs = append(errs, fmt.Errorf("rollcall.root_sha256=%q: need the squashfs's SHA-256 (64 hex digits)", c.RootSHA256))
	}
	if c.Init != "" && (!path.IsAbs(c.Init) || path.Clean(c.Init) != c.Init) {
		errs = append(errs, fmt.Errorf("rollcall.init=%q: need an absolute, clean path", c.Init))
	}
	if c.Hostname != "" && !ValidHostname(c.Hostname) {
		errs = append(errs, fmt.Errorf("hostname=%q: not a host name (letters, digits, '-' and '.', at most 64)", c.Hostname))
	}
	return errors.Join(errs...)
}

// InitPath is rollcall.init= or DefaultInit.
func (c Config) InitPath() string {
	if c.Init == "" {
		return DefaultInit
	}
	return c.Init
}

// ValidHostname reports whether s can be the kernel's host name: at most
// 64 bytes (HOST_NAME_MAX) of letters, digits, '-' and '.', with no empty
// label and no label starting or ending with '-'.
func ValidHostname(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

func httpURL(s string, schemes ...string) bool {
	u, err := url.Parse(s)
	if s == "" || err != nil || u.Host == "" {
		return false
	}
	for _, sc := range schemes {
		if u.Scheme == sc {
			return true
		}
	}
	return false
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// SplitCmdline splits a kernel command line on spaces, keeping
// double-quoted values together (the kernel's own rule).
func SplitCmdline(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// ErrCAMismatch: the CA bundle holds no certificate rollcall.ca= names.
var ErrCAMismatch = errors.New("ca.pem does not match rollcall.ca")

// PinnedCA returns the certificate of a CA bundle (the cluster's ca.pem:
// the current root first, then any a rotation keeps trusted) whose SHA-256
// of the DER equals fingerprint (hex; "sha256:", case and colons ignored).
// The pin may name any root of the bundle: a machine that booted just
// before a rotation pins the old one, and the node's HTTPS chain carries the
// cross certificate that leads to it. At most 8 blocks are read.
func PinnedCA(pemBytes []byte, fingerprint string) (*x509.Certificate, error) {
	want := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(fingerprint, "sha256:"), ":", ""))
	if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("rollcall.ca=%q is not a SHA-256 fingerprint (64 hex digits)", fingerprint)
	}
	var first string
	rest := pemBytes
	for range 8 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		sum := sha256.Sum256(b.Bytes)
		got := hex.EncodeToString(sum[:])
		if first == "" {
			first = got
		}
		if got == want {
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("ca.pem: %w", err)
			}
			return cert, nil
		}
	}
	if first == "" {
		return nil, fmt.Errorf("%w: no PEM certificate", ErrCAMismatch)
	}
	return nil, fmt.Errorf("%w: its first certificate has fingerprint %s, and none has the pinned %s", ErrCAMismatch, first, want)
}
