package raftfsm

import (
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/rollcall/rollcall/store"
)

// The OS image catalog (issue 18): names with versions, each version one
// zstd-compressed raw disk image held as a blob by every node. The
// proposer (appliance/oscatalog) downloads, verifies, converts and
// compresses; a command carries only the outcome, with the version, its
// hashes and its import time, so Apply checks and writes.
//
// Removing a version: a version a queued or running deploy job names is
// never removed (store.OSVersionInUse). The current version is refused
// while another exists: promote one first (MAAS keeps a boot resource's
// selected version the same way; Ironic leaves the image to Glance, whose
// "protected" flag refuses the delete). The last version may go: the name
// then has no current, and a deployment of it is refused until a sync or
// import brings one.

// OSPruneMinAge is the youngest a version may be and still be pruned.
const OSPruneMinAge = 24 * time.Hour

// maxOSVersions bounds the versions one name holds: a sync that would
// pass it is refused (pruning keeps far fewer).
const maxOSVersions = 64

// OSFileName is the name of a version's one file, the compressed raw image.
const OSFileName = "disk.raw.zst"

// OSVersion is store.OSVersion in an OSVersionAdd: what the proposer made.
// The holders (Nodes) are not carried: the version is held by the node that
// made it, named in the command.
type OSVersion struct {
	Version    string    `json:"version"`
	File       ImageFile `json:"file"`
	RawSize    int64     `json:"raw_size"`
	RawSHA256  string    `json:"raw_sha256"`
	SectorSize int       `json:"sector_size,omitempty"`
	Upstream   string    `json:"upstream,omitempty"`
	Source     string    `json:"source,omitempty"`
	Format     string    `json:"format,omitempty"`
	Imported   time.Time `json:"imported"`
}

// OSVersionBody is the body of a version record.
func OSVersionBody(v store.OSVersion) OSVersion {
	return OSVersion{
		Version: v.Version, File: imageFileBody(v.File), RawSize: v.RawSize, RawSHA256: v.RawSHA256, SectorSize: v.SectorSize,
		Upstream: v.Upstream, Source: v.Source, Format: v.Format, Imported: v.Imported,
	}
}

func (b OSVersion) record() store.OSVersion {
	return store.OSVersion{
		Version: b.Version, File: b.File.record(), RawSize: b.RawSize, RawSHA256: b.RawSHA256, SectorSize: b.SectorSize,
		Upstream: b.Upstream, Source: b.Source, Format: b.Format, Imported: b.Imported,
	}
}

// OSVersionAdd records a new version held by Node, creating the name when
// it is new (with Family and Track). Current moves to it when the name
// tracks latest or has no current: a sync flips current in this one
// command.
type OSVersionAdd struct {
	Name   string    `json:"name"`
	Family string    `json:"family,omitempty"` // set when non-empty
	Track  string    `json:"track,omitempty"`  // for a new name; "" is latest
	New    OSVersion `json:"version"`
	Node   string    `json:"node"`
	Now    time.Time `json:"now"`
}

// OSPromote makes a version current.
type OSPromote struct {
	Name      string    `json:"name"`
	OSVersion string    `json:"version"`
	Now       time.Time `json:"now"`
}

// OSVersionRemove forgets one version (see the package note on what is
// refused).
type OSVersionRemove struct {
	Name      string    `json:"name"`
	OSVersion string    `json:"version"`
	Now       time.Time `json:"now"`
}

// OSImageSet sets a name's family and track, creating the name when it is
// new (os_sources names it before its first version).
type OSImageSet struct {
	Name   string    `json:"name"`
	Family string    `json:"family,omitempty"`
	Track  string    `json:"track,omitempty"`
	Now    time.Time `json:"now"`
}

// OSHave says a node holds a verified copy of a version's file.
type OSHave struct {
	Name      string    `json:"name"`
	OSVersion string    `json:"version"`
	Node      string    `json:"node"`
	SHA256    string    `json:"sha256"`
	Now       time.Time `json:"now"`
}

// OSImageDelete forgets a name and all its versions; refused while a job
// names any of them.
type OSImageDelete struct {
	Name string `json:"name"`
}

// OSPrune removes the versions the proposer chose to keep Keep per name.
// Apply checks every one again (not current, not younger than
// OSPruneMinAge at Now, no job uses it, Keep remain) and refuses the whole
// command when one fails: the proposer chooses again from newer state.
type OSPrune struct {
	Name     string    `json:"name"`
	Versions []string  `json:"versions"`
	Keep     int       `json:"keep"`
	Now      time.Time `json:"now"`
}

// OSSyncStart claims the catalog's sync for Node until Until. It is
// refused while another node holds an unexpired claim, and a Timer start
// while the last start is younger than Interval: after a leader change the
// new leader finds the last start in the store and waits. Renew extends a
// claim the node holds, keeping its start.
type OSSyncStart struct {
	Node     string        `json:"node"`
	Now      time.Time     `json:"now"`
	Until    time.Time     `json:"until"`
	Timer    bool          `json:"timer,omitempty"`
	Interval time.Duration `json:"interval,omitempty"`
	Renew    bool          `json:"renew,omitempty"`
}

// OSSyncEnd ends the claim Node took at Started, with what it did.
type OSSyncEnd struct {
	Node    string    `json:"node"`
	Started time.Time `json:"started"`
	Now     time.Time `json:"now"`
	Result  []string  `json:"result,omitempty"`
	Error   string    `json:"error,omitempty"`
}

func (*OSVersionAdd) Type() Type        { return TypeOSVersionAdd }
func (*OSPromote) Type() Type           { return TypeOSPromote }
func (*OSVersionRemove) Type() Type     { return TypeOSVersionRemove }
func (*OSImageSet) Type() Type          { return TypeOSImageSet }
func (*OSHave) Type() Type              { return TypeOSHave }
func (*OSImageDelete) Type() Type       { return TypeOSImageDelete }
func (*OSPrune) Type() Type             { return TypeOSPrune }
func (*OSSyncStart) Type() Type         { return TypeOSSyncStart }
func (*OSSyncEnd) Type() Type           { return TypeOSSyncEnd }
func (*OSVersionAdd) Version() uint8    { return 1 }
func (*OSPromote) Version() uint8       { return 1 }
func (*OSVersionRemove) Version() uint8 { return 1 }
func (*OSImageSet) Version() uint8      { return 1 }
func (*OSHave) Version() uint8          { return 1 }
func (*OSImageDelete) Version() uint8   { return 1 }
func (*OSPrune) Version() uint8         { return 1 }
func (*OSSyncStart) Version() uint8     { return 1 }
func (*OSSyncEnd) Version() uint8       { return 1 }

func osCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeOSVersionAdd:    {"os-version-add", 1, func() Command { return &OSVersionAdd{} }},
		TypeOSPromote:       {"os-promote", 1, func() Command { return &OSPromote{} }},
		TypeOSVersionRemove: {"os-version-remove", 1, func() Command { return &OSVersionRemove{} }},
		TypeOSImageSet:      {"os-image-set", 1, func() Command { return &OSImageSet{} }},
		TypeOSHave:          {"os-have", 1, func() Command { return &OSHave{} }},
		TypeOSImageDelete:   {"os-image-delete", 1, func() Command { return &OSImageDelete{} }},
		TypeOSPrune:         {"os-prune", 1, func() Command { return &OSPrune{} }},
		TypeOSSyncStart:     {"os-sync-start", 1, func() Command { return &OSSyncStart{} }},
		TypeOSSyncEnd:       {"os-sync-end", 1, func() Command { return &OSSyncEnd{} }},
	}
}

func validSHA256Hex(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == s
}

// osImage reads a name, or a new record when create is set and it does
// not exist.
func osImage(tx *store.Tx, name string, create bool) (store.OSImage, error) {
	if err := store.ValidOSName(name); err != nil {
		return store.OSImage{}, err
	}
	o, err := tx.OSImage(name)
	if create && errors.Is(err, store.ErrNotFound) {
		return store.OSImage{Name: name}, nil
	}
	return o, err
}

func versionIndex(o store.OSImage, v string) int {
	return slices.IndexFunc(o.Versions, func(x store.OSVersion) bool { return x.Version == v })
}

func (c *OSVersionAdd) apply(tx *store.Tx) error {
	v := c.New.record()
	switch {
	case store.ValidOSFamily(c.Family) != nil:
		return store.ValidOSFamily(c.Family)
	case store.ValidOSTrack(c.Track) != nil:
		return store.ValidOSTrack(c.Track)
	case store.ValidOSVersion(v.Version) != nil:
		return store.ValidOSVersion(v.Version)
	case store.ValidName(c.Node) != nil:
		return store.Errorf(store.ErrInvalid, "OS version %s: the node that holds it is not a node name", v.Version)
	case v.File.Name != OSFileName || !validSHA256Hex(v.File.SHA256) || v.File.Size <= 0:
		return store.Errorf(store.ErrInvalid, "OS version %s: the file must be %s with a size and a SHA-256", v.Version, OSFileName)
	case !validSHA256Hex(v.RawSHA256) || v.RawSize <= 0:
		return store.Errorf(store.ErrInvalid, "OS version %s: the raw image needs a size and a SHA-256", v.Version)
	case v.SectorSize != 0 && v.SectorSize != 512 && v.SectorSize != 4096:
		return store.Errorf(store.ErrInvalid, "OS version %s: sector size %d is not 512 or 4096", v.Version, v.SectorSize)
	case v.Format != "qcow2" && v.Format != "raw":
		return store.Errorf(store.ErrInvalid, "OS version %s: source format %q is not qcow2 or raw", v.Version, store.Clip(v.Format))
	case v.Imported.IsZero():
		return store.Errorf(store.ErrInvalid, "OS version %s needs its import time", v.Version)
	case len(v.Upstream) > 200 || len(v.Source) > 2048:
		return store.Errorf(store.ErrInvalid, "OS version %s: upstream checksum or source too long", v.Version)
	}
	o, err := osImage(tx, c.Name, true)
	if err != nil {
		return err
	}
	if versionIndex(o, v.Version) >= 0 {
		return store.Errorf(store.ErrConflict, "OS image %s already has version %s", o.Name, v.Version)
	}
	if len(o.Versions) >= maxOSVersions {
		return store.Errorf(store.ErrConflict, "OS image %s holds %d versions, the most it may: remove or prune some first", o.Name, len(o.Versions))
	}
	if o.Track == "" && o.Versions == nil && c.Track != "" {
		o.Track = c.Track
	}
	if c.Family != "" {
		o.Family = c.Family
	}
	v.Nodes = []string{c.Node}
	o.Versions = append(o.Versions, v)
	if o.Track != store.TrackPinned || o.Current == "" {
		o.Current = v.Version
	}
	return tx.PutOSImage(o)
}

func (c *OSPromote) apply(tx *store.Tx) error {
	o, err := osImage(tx, c.Name, false)
	if err != nil {
		return err
	}
	if versionIndex(o, c.OSVersion) < 0 {
		return store.Errorf(store.ErrNotFound, "OS image %s has no version %q", o.Name, store.Clip(c.OSVersion))
	}
	if o.Current == c.OSVersion {
		return nil
	}
	o.Current = c.OSVersion
	return tx.PutOSImage(o)
}

func (c *OSVersionRemove) apply(tx *store.Tx) error {
	o, err := osImage(tx, c.Name, false)
	if err != nil {
		return err
	}
	i := versionIndex(o, c.OSVersion)
	if i < 0 {
		return store.Errorf(store.ErrNotFound, "OS image %s has no version %q", o.Name, store.Clip(c.OSVersion))
	}
	if job, err := tx.OSVersionInUse(o.Name, c.OSVersion); err != nil {
		return err
	} else if job != "" {
		return store.Errorf(store.ErrConflict, "OS image %s version %s is in use by job %s", o.Name, c.OSVersion, job)
	}
	if o.Current == c.OSVersion && len(o.Versions) > 1 {
		return store.Errorf(store.ErrConflict, "OS image %s version %s is current: promote another version first", o.Name, c.OSVersion)
	}
	o.Versions = slices.Delete(o.Versions, i, i+1)
	if o.Current == c.OSVersion {
		o.Current = ""
	}
	return tx.PutOSImage(o)
}

func (c *OSImageSet) apply(tx *store.Tx) error {
	if err := store.ValidOSFamily(c.Family); err != nil {
		return err
	}
	if err := store.ValidOSTrack(c.Track); err != nil {
		return err
	}
	o, err := osImage(tx, c.Name, true)
	if err != nil {
		return err
	}
	o.Family, o.Track = c.Family, c.Track
	return tx.PutOSImage(o)
}

func (c *OSHave) apply(tx *store.Tx) error {
	o, err := osImage(tx, c.Name, false)
	if err != nil {
		return err
	}
	i := versionIndex(o, c.OSVersion)
	if i < 0 {
		return store.Errorf(store.ErrNotFound, "OS image %s has no version %q", o.Name, store.Clip(c.OSVersion))
	}
	v := &o.Versions[i]
	if v.File.SHA256 != c.SHA256 {
		return store.Errorf(store.ErrConflict, "OS image %s version %s is not the file %s verified", o.Name, c.OSVersion, c.Node)
	}
	if err := store.ValidName(c.Node); err != nil {
		return err
	}
	if slices.Contains(v.Nodes, c.Node) {
		return nil
	}
	v.Nodes = append(v.Nodes, c.Node)
	slices.Sort(v.Nodes)
	return tx.PutOSImage(o)
}

func (c *OSImageDelete) apply(tx *store.Tx) error {
	o, err := osImage(tx, c.Name, false)
	if err != nil {
		return err
	}
	if job, err := tx.OSVersionInUse(o.Name, ""); err != nil {
		return err
	} else if job != "" {
		return store.Errorf(store.ErrConflict, "OS image %s is in use by job %s", o.Name, job)
	}
	return tx.DeleteOSImage(o.Name)
}

func (c *OSPrune) apply(tx *store.Tx) error {
	o, err := osImage(tx, c.Name, false)
	if err != nil {
		return err
	}
	if c.Keep < 1 {
		return store.Errorf(store.ErrInvalid, "OS prune of %s: keep must be at least 1", o.Name)
	}
	if len(c.Versions) == 0 {
		return store.Errorf(store.ErrInvalid, "OS prune of %s names no version", o.Name)
	}
	if len(o.Versions)-len(c.Versions) < c.Keep {
		return store.Errorf(store.ErrConflict, "OS prune of %s would leave fewer than %d versions", o.Name, c.Keep)
	}
	drop := map[string]bool{}
	for _, name := range c.Versions {
		i := versionIndex(o, name)
		switch {
		case i < 0 || drop[name]:
			return store.Errorf(store.ErrNotFound, "OS prune of %s: no version %q (or named twice)", o.Name, store.Clip(name))
		case name == o.Current:
			return store.Errorf(store.ErrConflict, "OS prune of %s: version %s is current", o.Name, name)
		case c.Now.Sub(o.Versions[i].Imported) < OSPruneMinAge:
			return store.Errorf(store.ErrConflict, "OS prune of %s: version %s is younger than a day", o.Name, name)
		}
		if job, err := tx.OSVersionInUse(o.Name, name); err != nil {
			return err
		} else if job != "" {
			return store.Errorf(store.ErrConflict, "OS prune of %s: version %s is in use by job %s", o.Name, name, job)
		}
		drop[name] = true
	}
	o.Versions = slices.DeleteFunc(o.Versions, func(v store.OSVersion) bool { return drop[v.Version] })
	return tx.PutOSImage(o)
}

func (c *OSSyncStart) apply(tx *store.Tx) error {
	if err := store.ValidName(c.Node); err != nil {
		return err
	}
	if !c.Until.After(c.Now) {
		return store.Errorf(store.ErrInvalid, "OS sync claim ends before it starts")
	}
	s, err := tx.OSSyncState()
	if err != nil {
		return err
	}
	running := s.Running(c.Now)
	switch {
	case running && s.Node != c.Node:
		return store.Errorf(store.ErrConflict, "an OS sync is running on %s since %s", s.Node, s.Started.Format(time.RFC3339))
	case c.Renew && !(running && s.Node == c.Node):
		return store.Errorf(store.ErrConflict, "OS sync: %s holds no claim to renew", c.Node)
	case c.Renew:
		s.Until = c.Until
		return tx.PutOSSyncState(s)
	case running:
		return store.Errorf(store.ErrConflict, "an OS sync is already running on %s since %s", s.Node, s.Started.Format(time.RFC3339))
	case c.Timer && !s.Started.IsZero() && c.Now.Sub(s.Started) < c.Interval:
		return store.Errorf(store.ErrConflict, "OS sync: the last one started at %s, not due yet", s.Started.Format(time.RFC3339))
	}
	s = store.OSSync{Node: c.Node, Started: c.Now, Until: c.Until, Timer: c.Timer,
		// What the last finished sync did stays until this one ends.
		Finished: s.Finished, Result: s.Result, Error: s.Error}
	return tx.PutOSSyncState(s)
}

func (c *OSSyncEnd) apply(tx *store.Tx) error {
	s, err := tx.OSSyncState()
	if err != nil {
		return err
	}
	if s.Node != c.Node || !s.Started.Equal(c.Started) {
		return store.Errorf(store.ErrConflict, "OS sync: %s does not hold the claim it took at %s", c.Node, c.Started.Format(time.RFC3339))
	}
	if len(c.Result) > 2*maxOSVersions || len(c.Error) > 1024 {
		return store.Errorf(store.ErrInvalid, "OS sync result too long")
	}
	s.Finished, s.Until, s.Result, s.Error = c.Now, c.Now, c.Result, c.Error
	return tx.PutOSSyncState(s)
}
