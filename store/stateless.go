package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Stateless nodes (issue 20, the spec's "Stateless nodes (Warewulf-style)"):
// a profile binds a boot image (kernel, initrd, squashfs) to overlays, kernel
// arguments, a pool of node names and the IPAM subnets addresses come from;
// assigning a ready machine to a profile makes a node record (name, number,
// addresses, the sealed SSH host key) and moves the machine to stateless,
// and its first overlay fetch to booted. Overlays are file trees kept in the
// store, so that any node renders them. The cluster's munge key is one
// sealed record, made with the first profile.
//
// Every bucket here is made on first use (ensureBuckets), not at Open: a
// store without stateless nodes then holds the buckets an older node's
// does, and the two hash alike during a rolling upgrade.

var (
	bucketProfiles      = []byte("profiles")
	bucketOverlays      = []byte("overlays")
	bucketStateless     = []byte("stateless_nodes")         // machine ID → StatelessNode
	bucketStatelessName = []byte("stateless_nodes.by_name") // node name → machine ID (unique)
	bucketStatelessProf = []byte("stateless_nodes.by_profile")
	bucketStatelessKeys = []byte("stateless.secrets") // the cluster's munge key
)

// Tables for blocking queries and exports.
const (
	TableProfiles       = "profiles"
	TableOverlays       = "overlays"
	TableStatelessNodes = "stateless_nodes"
)

// Machine states of a stateless node. Their moves are in Transitions.
const (
	StateStateless = "stateless" // assigned to a profile; boots its image
	StateBooted    = "booted"    // has fetched an overlay since it was assigned
)

// IPAM address kind of a stateless node's addresses.
const HowStateless = "stateless"

// Bounds of a profile and an overlay, so that a record (and the command
// that carries it) stays small whatever an operator sends.
const (
	MaxProfileOverlays = 16
	MaxProfileSubnets  = 8
	MaxProfileArgs     = 1024
	MaxProfileVars     = 256
	MaxProfileVarName  = 64
	MaxProfileVarValue = 64 << 10
	MaxProfileVarBytes = 256 << 10
	// MaxNamePool bounds first..last of a profile's names: assign walks
	// the pool for the next free number inside the state machine.
	MaxNamePool = 65536

	MaxOverlayFiles     = 2000
	MaxOverlayBytes     = 8 << 20
	MaxOverlayPath      = 255
	MaxOverlayComponent = 100

	// MungeKeySize is the munge key's size in bytes (munge's own default
	// is 1024).
	MungeKeySize = 1024
)

// Heartbeats: a booted node fetches its runtime overlay every
// RefreshInterval; one that missed two refreshes (and a minute more) is
// stale. Stale is computed when read, never a state.
const (
	RefreshInterval = 300 * time.Second
	StaleAfter      = 2*RefreshInterval + SeenInterval + 60*time.Second
	// SeenInterval is how often at most a node's seen time is written
	// through Raft (the API coalesces fetches in between).
	SeenInterval = 60 * time.Second
)

// Default name pool of a profile.
const (
	DefaultNameFormat = "node%03d"
	DefaultNameFirst  = 1
	DefaultNameLast   = 999
)

// Profile binds an image to overlays and a node pool.
type Profile struct {
	Name       string            `json:"name"`
	Image      string            `json:"image"`          // a store.Image name (kernel, initrd, squashfs)
	Overlays   []string          `json:"overlays"`       // applied in order; each has system/ and runtime/
	Args       string            `json:"args,omitempty"` // extra kernel arguments
	NameFormat string            `json:"name_format"`    // default "node%03d"
	NameFirst  int               `json:"name_first"`     // pool of numbers: first..last (default 1..999)
	NameLast   int               `json:"name_last"`
	Subnets    []string          `json:"subnets,omitempty"` // IPAM subnets (CIDR) addresses come from
	Vars       map[string]string `json:"vars,omitempty"`
	Created    time.Time         `json:"created"`
	Index      uint64            `json:"index"`
}

// OverlayFile is one file of an overlay.
type OverlayFile struct {
	Path    string `json:"path"`    // slash path starting with "system/" or "runtime/", clean, no "..", no leading "/"
	Mode    uint32 `json:"mode"`    // permission bits only (0o7777 mask); directories are implied
	Content []byte `json:"content"` // base64 in JSON
}

// Overlay is a named file tree with a system/ and a runtime/ part; files
// ending in .tmpl are Go templates (appliance/overlay renders them).
type Overlay struct {
	Name    string        `json:"name"`
	Files   []OverlayFile `json:"files"`  // sorted by Path
	SHA256  string        `json:"sha256"` // of the canonical encoding; the render cache key
	Size    int64         `json:"size"`   // sum of content sizes
	Updated time.Time     `json:"updated"`
	Index   uint64        `json:"index"`
}

// StatelessNode is one assigned machine, keyed by machine ID.
type StatelessNode struct {
	Machine    string    `json:"machine"`
	Profile    string    `json:"profile"`
	Name       string    `json:"name"` // rendered from NameFormat, unique cluster-wide
	Number     int       `json:"number"`
	Addresses  []string  `json:"addresses,omitempty"` // "10.0.0.5/24" from the profile's subnets (IPAM claims, kind "stateless")
	Generation uint64    `json:"generation"`          // raft index of the assign; binds the node token
	Assigned   time.Time `json:"assigned"`
	Booted     time.Time `json:"booted,omitzero"`    // first overlay fetch
	LastSeen   time.Time `json:"last_seen,omitzero"` // last runtime fetch (heartbeat)
	// SSHHostKeySealed is the node's ed25519 private key (OpenSSH PEM),
	// sealed under the master key with AAD SSHHostKeyAAD(machine).
	SSHHostKeySealed []byte `json:"ssh_host_key_sealed,omitempty"`
	SSHHostKeyPub    string `json:"ssh_host_key_pub,omitempty"` // "ssh-ed25519 AAAA…" (public, may be shown)
}

// Stale reports whether a booted node has missed two refreshes at now
// (the default refresh interval).
func (n StatelessNode) Stale(now time.Time) bool { return n.StaleAfter(now, StaleAfter) }

// StaleAfterFor is how long a node refreshing every refresh may go
// unseen: two refreshes, the coalescing of its seen times
// (min(SeenInterval, refresh)) and a minute.
func StaleAfterFor(refresh time.Duration) time.Duration {
	if refresh <= 0 {
		return StaleAfter
	}
	return 2*refresh + min(SeenInterval, refresh) + time.Minute
}

// StaleAfter reports whether a booted node has gone unseen for longer
// than after at now.
func (n StatelessNode) StaleAfter(now time.Time, after time.Duration) bool {
	if n.Booted.IsZero() {
		return false
	}
	last := n.LastSeen
	if last.IsZero() {
		last = n.Booted
	}
	return now.Sub(last) > after
}

// SSHHostKeyAAD is the additional data a node's sealed host key is bound
// to: a sealed key copied onto another node's record does not open.
func SSHHostKeyAAD(machine string) string { return "ssh-host-key/" + machine }

// MungeKeyAAD is the additional data the sealed munge key is bound to.
const MungeKeyAAD = "munge-key"

// MungeKey is the cluster's munge key, sealed under the master key.
type MungeKey struct {
	Sealed  []byte    `json:"sealed"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"`
}

var nameFormatPattern = regexp.MustCompile(`^([a-z0-9-]*)%(0[1-9])?d([a-z0-9-]*)$`)

// NodeName renders number through a profile's name format.
func NodeName(format string, number int) (string, error) {
	m := nameFormatPattern.FindStringSubmatch(format)
	if m == nil {
		return "", Errorf(ErrInvalid, "name format %q must be lowercase letters, digits and '-' around one %%d (or %%0Nd, N from 1 to 9)", Clip(format))
	}
	n := strconv.Itoa(number)
	if m[2] != "" {
		width := int(m[2][1] - '0')
		if len(n) < width {
			n = strings.Repeat("0", width-len(n)) + n
		}
	}
	return m[1] + n + m[3], nil
}

// WithDefaults fills a profile's unset name pool with the defaults.
func (p Profile) WithDefaults() Profile {
	if p.NameFormat == "" {
		p.NameFormat = DefaultNameFormat
	}
	if p.NameFirst == 0 && p.NameLast == 0 {
		p.NameFirst, p.NameLast = DefaultNameFirst, DefaultNameLast
	}
	if p.Overlays == nil {
		p.Overlays = []string{}
	}
	return p
}

var varNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckProfile checks what a profile holds, bounds and forms only (that
// its image and overlays exist is the state machine's to check against the
// store).
func CheckProfile(p Profile) error {
	if err := ValidImageName(p.Name); err != nil {
		return Errorf(ErrInvalid, "profile name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63, not starting with a dot)", Clip(p.Name))
	}
	if err := ValidImageName(p.Image); err != nil {
		return Errorf(ErrInvalid, "profile %s: image %q is not an image name", p.Name, Clip(p.Image))
	}
	if len(p.Overlays) > MaxProfileOverlays {
		return Errorf(ErrInvalid, "profile %s: %d overlays is more than the %d allowed", p.Name, len(p.Overlays), MaxProfileOverlays)
	}
	for i, o := range p.Overlays {
		if ValidImageName(o) != nil || slices.Contains(p.Overlays[:i], o) {
			return Errorf(ErrInvalid, "profile %s: overlay %q must be a lowercase name (letters, digits, '.', '_', '-'), listed once", p.Name, Clip(o))
		}
	}
	if len(p.Args) > MaxProfileArgs || !utf8.ValidString(p.Args) || strings.IndexFunc(p.Args, unicode.IsControl) >= 0 {
		return Errorf(ErrInvalid, "profile %s: kernel arguments must be one line of printable text, at most %d bytes", p.Name, MaxProfileArgs)
	}
	for _, a := range strings.Fields(p.Args) {
		if k, _, _ := strings.Cut(a, "="); strings.HasPrefix(k, "rollcall.") || k == "hostname" {
			return Errorf(ErrInvalid, "profile %s: kernel argument %q is set by rollcall itself", p.Name, Clip(a))
		}
	}
	if p.NameFirst < 0 || p.NameLast < p.NameFirst || p.NameLast-p.NameFirst >= MaxNamePool {
		return Errorf(ErrInvalid, "profile %s: name pool %d..%d must be 0 ≤ first ≤ last with at most %d numbers", p.Name, p.NameFirst, p.NameLast, MaxNamePool)
	}
	for _, n := range []int{p.NameFirst, p.NameLast} {
		name, err := NodeName(p.NameFormat, n)
		if err != nil {
			return Errorf(ErrInvalid, "profile %s: %s", p.Name, Public(err))
		}
		if err := ValidName(name); err != nil || ValidMachineID(name) {
			return Errorf(ErrInvalid, "profile %s: name format %q makes %q, which is not a DNS label (at most 63 characters, not of the form of a machine ID)", p.Name, p.NameFormat, Clip(name))
		}
	}
	if len(p.Subnets) > MaxProfileSubnets {
		return Errorf(ErrInvalid, "profile %s: %d subnets is more than the %d allowed", p.Name, len(p.Subnets), MaxProfileSubnets)
	}
	for i, s := range p.Subnets {
		pfx, err := netip.ParsePrefix(s)
		if err != nil || pfx.Masked() != pfx || pfx.String() != s || slices.Contains(p.Subnets[:i], s) {
			return Errorf(ErrInvalid, "profile %s: subnet %q must be a CIDR in canonical form (10.0.0.0/24), listed once", p.Name, Clip(s))
		}
	}
	if err := CheckVars("profile "+p.Name, p.Vars); err != nil {
		return err
	}
	return nil
}

// Overlay trees.
const (
	TreeSystem  = "system"
	TreeRuntime = "runtime"
)

// CheckOverlayFiles checks an overlay's files against the bounds every
// face and the state machine apply: at most MaxOverlayFiles files and
// MaxOverlayBytes of content; each path UTF-8 without NUL, at most
// MaxOverlayPath bytes and MaxOverlayComponent per component, clean
// (path.Clean(p) == p, no "." or ".." component, not absolute), under
// system/ or runtime/; a mode of permission bits only; no path twice, none
// both a file and the directory of another.
func CheckOverlayFiles(files []OverlayFile) error {
	if len(files) > MaxOverlayFiles {
		return Errorf(ErrInvalid, "overlay has %d files, more than the %d allowed", len(files), MaxOverlayFiles)
	}
	var total int64
	set := make(map[string]bool, len(files))
	for _, f := range files {
		if err := checkOverlayPath(f.Path); err != nil {
			return err
		}
		if f.Mode&^0o7777 != 0 {
			return Errorf(ErrInvalid, "overlay file %s: mode %#o has bits beyond the permission bits (0o7777)", f.Path, f.Mode)
		}
		if set[f.Path] {
			return Errorf(ErrInvalid, "overlay file %s is listed twice", f.Path)
		}
		set[f.Path] = true
		total += int64(len(f.Content))
		if total > MaxOverlayBytes {
			return Errorf(ErrInvalid, "overlay content is more than the %d MiB allowed", MaxOverlayBytes>>20)
		}
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "." && d != "/"; d = path.Dir(d) {
			if set[d] {
				return Errorf(ErrInvalid, "overlay path %s is a file and the directory of %s", d, f.Path)
			}
		}
	}
	return nil
}

func checkOverlayPath(p string) error {
	switch {
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return Errorf(ErrInvalid, "overlay path %q must be UTF-8 without NUL", Clip(p))
	case len(p) > MaxOverlayPath:
		return Errorf(ErrInvalid, "overlay path %q is longer than %d bytes", Clip(p), MaxOverlayPath)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p:
		return Errorf(ErrInvalid, "overlay path %q must be relative and clean (no leading '/', '//', trailing '/')", Clip(p))
	case !strings.HasPrefix(p, TreeSystem+"/") && !strings.HasPrefix(p, TreeRuntime+"/"):
		return Errorf(ErrInvalid, "overlay path %q must start with system/ or runtime/", Clip(p))
	}
	for _, c := range strings.Split(p, "/") {
		if c == "." || c == ".." || c == "" {
			return Errorf(ErrInvalid, "overlay path %q has a '.' or '..' component", Clip(p))
		}
		if len(c) > MaxOverlayComponent {
			return Errorf(ErrInvalid, "overlay path %q has a component longer than %d bytes", Clip(p), MaxOverlayComponent)
		}
	}
	return nil
}

// SortOverlayFiles sorts files by path, in place.
func SortOverlayFiles(files []OverlayFile) {
	slices.SortFunc(files, func(a, b OverlayFile) int { return strings.Compare(a.Path, b.Path) })
}

// OverlayDigest is the SHA-256 (hex) of the canonical encoding of files
// sorted by path, and their total size. For each file: the path's length
// (4 bytes, big endian) and bytes, the mode (4 bytes), the content's
// length (8 bytes) and bytes.
func OverlayDigest(files []OverlayFile) (string, int64) {
	h := sha256.New()
	var n [8]byte
	var size int64
	for _, f := range files {
		binary.BigEndian.PutUint32(n[:4], uint32(len(f.Path)))
		h.Write(n[:4])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint32(n[:4], f.Mode)
		h.Write(n[:4])
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Content)))
		h.Write(n[:])
		h.Write(f.Content)
		size += int64(len(f.Content))
	}
	return hex.EncodeToString(h.Sum(nil)), size
}

// Profile returns one profile.
func (t *Tx) Profile(name string) (Profile, error) {
	return getNamed[Profile](t, bucketProfiles, "profile", name)
}

// Profiles lists profiles by name.
func (t *Tx) Profiles() ([]Profile, error) { return listNamed[Profile](t, bucketProfiles) }

// PutProfile writes a profile.
func (t *Tx) PutProfile(p Profile) error {
	p.Index = t.Index
	return t.putNamed(bucketProfiles, TableProfiles, p.Name, p)
}

// DeleteProfile removes a profile (the caller checks no node uses it).
func (t *Tx) DeleteProfile(name string) error {
	return t.deleteNamed(bucketProfiles, TableProfiles, "profile", name)
}

// Overlay returns one overlay.
func (t *Tx) Overlay(name string) (Overlay, error) {
	return getNamed[Overlay](t, bucketOverlays, "overlay", name)
}

// Overlays lists overlays by name, files and all.
func (t *Tx) Overlays() ([]Overlay, error) { return listNamed[Overlay](t, bucketOverlays) }

// PutOverlay writes an overlay.
func (t *Tx) PutOverlay(o Overlay) error {
	o.Index = t.Index
	return t.putNamed(bucketOverlays, TableOverlays, o.Name, o)
}

// DeleteOverlay removes an overlay (the caller checks no profile names it).
func (t *Tx) DeleteOverlay(name string) error {
	return t.deleteNamed(bucketOverlays, TableOverlays, "overlay", name)
}

// StatelessNode returns the node record of a machine.
func (t *Tx) StatelessNode(machine string) (StatelessNode, error) {
	return getNamed[StatelessNode](t, bucketStateless, "stateless node of machine", machine)
}

// StatelessNodes lists node records by machine ID.
func (t *Tx) StatelessNodes() ([]StatelessNode, error) {
	return listNamed[StatelessNode](t, bucketStateless)
}

// StatelessNodeByName returns the machine ID of the node named name.
func (t *Tx) StatelessNodeByName(name string) (string, bool) {
	b := t.tx.Bucket(bucketStatelessName)
	if b == nil {
		return "", false
	}
	v := b.Get([]byte(name))
	return string(v), v != nil
}

// StatelessMachinesByProfile returns, sorted, the machines assigned to a
// profile.
func (t *Tx) StatelessMachinesByProfile(profile string) []string {
	return t.lookup(bucketStatelessProf, profile)
}

// PutStatelessNode writes a node record and its indexes; its name must
// not be another machine's node name.
func (t *Tx) PutStatelessNode(n StatelessNode) error {
	if !t.write {
		return ErrReadOnly
	}
	if id, ok := t.StatelessNodeByName(n.Name); ok && id != n.Machine {
		return Errorf(ErrConflict, "node name %s is taken by machine %s", n.Name, id)
	}
	if err := t.ensureBuckets(bucketStateless, bucketStatelessName, bucketStatelessProf); err != nil {
		return err
	}
	if old, err := t.StatelessNode(n.Machine); err == nil {
		if err := t.unindexStateless(old); err != nil {
			return err
		}
	}
	if err := t.putJSON(bucketStateless, n.Machine, n); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketStatelessName).Put([]byte(n.Name), []byte(n.Machine)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketStatelessProf).Put([]byte(n.Profile+"\x00"+n.Machine), nil); err != nil {
		return err
	}
	if err := t.logChange(TableStatelessNodes, n.Machine, OpPut); err != nil {
		return err
	}
	return t.touch(TableStatelessNodes)
}

func (t *Tx) unindexStateless(n StatelessNode) error {
	if err := t.tx.Bucket(bucketStatelessName).Delete([]byte(n.Name)); err != nil {
		return err
	}
	return t.tx.Bucket(bucketStatelessProf).Delete([]byte(n.Profile + "\x00" + n.Machine))
}

// DeleteStatelessNode removes a machine's node record (its host key with
// it) and its index entries.
func (t *Tx) DeleteStatelessNode(machine string) error {
	if !t.write {
		return ErrReadOnly
	}
	n, err := t.StatelessNode(machine)
	if err != nil {
		return err
	}
	if err := t.unindexStateless(n); err != nil {
		return err
	}
	if err := t.del(bucketStateless, machine); err != nil {
		return err
	}
	if err := t.logChange(TableStatelessNodes, machine, OpDelete); err != nil {
		return err
	}
	return t.touch(TableStatelessNodes)
}

var keyMungeKey = []byte("munge-key")

// MungeKey returns the cluster's sealed munge key; ok is false before
// the first profile made one.
func (t *Tx) MungeKey() (MungeKey, bool, error) {
	var k MungeKey
	b := t.tx.Bucket(bucketStatelessKeys)
	if b == nil || b.Get(keyMungeKey) == nil {
		return k, false, nil
	}
	if err := t.getJSON(bucketStatelessKeys, string(keyMungeKey), &k); err != nil {
		return k, false, err
	}
	return k, true, nil
}

// PutMungeKey writes the cluster's sealed munge key.
func (t *Tx) PutMungeKey(k MungeKey) error {
	if err := t.ensureBuckets(bucketStatelessKeys); err != nil {
		return err
	}
	k.Index = t.Index
	if err := t.putJSON(bucketStatelessKeys, string(keyMungeKey), k); err != nil {
		return err
	}
	return t.touch(TableProfiles)
}

// NextNodeNumber is the first number of p's pool whose name no node and
// no other machine than machine holds.
func (t *Tx) NextNodeNumber(p Profile, machine string) (int, string, error) {
	for n := p.NameFirst; n <= p.NameLast; n++ {
		name, err := NodeName(p.NameFormat, n)
		if err != nil {
			return 0, "", err
		}
		if id, ok := t.StatelessNodeByName(name); ok && id != machine {
			continue
		}
		if slices.ContainsFunc(t.MachineIDsByName(name), func(id string) bool { return id != machine }) {
			continue
		}
		return n, name, nil
	}
	return 0, "", Errorf(ErrConflict, "profile %s: every name of its pool (%s, %d..%d) is taken", p.Name, p.NameFormat, p.NameFirst, p.NameLast)
}

// describeNodes is "machine X" or "machine X and N others", for refusals.
func describeNodes(ids []string) string {
	if len(ids) == 1 {
		return "machine " + ids[0]
	}
	return fmt.Sprintf("machine %s and %d others", ids[0], len(ids)-1)
}

// ProfileUser names the nodes that use a profile, or "" when none does.
func (t *Tx) ProfileUser(name string) string {
	if ids := t.StatelessMachinesByProfile(name); len(ids) > 0 {
		return describeNodes(ids)
	}
	return ""
}

// ClusterVars are the variables every node's templates see as
// .ClusterVars (and, under a profile's own, as .Vars): a Slurm
// controller's name, an NFS server. One record, replaced whole.
type ClusterVars struct {
	Vars    map[string]string `json:"vars"`
	Updated time.Time         `json:"updated"`
	Index   uint64            `json:"index"`
}

var (
	bucketClusterVars = []byte("cluster_vars")
	keyClusterVars    = "vars"
)

// TableClusterVars is the cluster variables' table.
const TableClusterVars = "cluster_vars"

// CheckVars bounds a variable map (a profile's or the cluster's) as a
// profile's are bounded.
func CheckVars(what string, vars map[string]string) error {
	if len(vars) > MaxProfileVars {
		return Errorf(ErrInvalid, "%s: %d variables is more than the %d allowed", what, len(vars), MaxProfileVars)
	}
	total := 0
	for k, v := range vars {
		if len(k) > MaxProfileVarName || !varNamePattern.MatchString(k) {
			return Errorf(ErrInvalid, "%s: variable name %q must be letters, digits and '_' (not starting with a digit), at most %d bytes", what, Clip(k), MaxProfileVarName)
		}
		if len(v) > MaxProfileVarValue || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return Errorf(ErrInvalid, "%s: variable %s must be UTF-8 text without NUL, at most %d KiB", what, k, MaxProfileVarValue>>10)
		}
		total += len(k) + len(v)
	}
	if total > MaxProfileVarBytes {
		return Errorf(ErrInvalid, "%s: variables hold %d bytes, more than the %d KiB allowed", what, total, MaxProfileVarBytes>>10)
	}
	return nil
}

// ClusterVars returns the cluster's variables (none before the first set).
func (t *Tx) ClusterVars() (ClusterVars, error) {
	var v ClusterVars
	b := t.tx.Bucket(bucketClusterVars)
	if b == nil || b.Get([]byte(keyClusterVars)) == nil {
		return v, nil
	}
	err := t.getJSON(bucketClusterVars, keyClusterVars, &v)
	return v, err
}

// PutClusterVars replaces the cluster's variables.
func (t *Tx) PutClusterVars(v ClusterVars) error {
	if err := CheckVars("cluster vars", v.Vars); err != nil {
		return err
	}
	if err := t.ensureBuckets(bucketClusterVars); err != nil {
		return err
	}
	v.Index = t.Index
	if err := t.putJSON(bucketClusterVars, keyClusterVars, v); err != nil {
		return err
	}
	if err := t.logChange(TableClusterVars, keyClusterVars, OpPut); err != nil {
		return err
	}
	return t.touch(TableClusterVars)
}
