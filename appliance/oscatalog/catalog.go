package oscatalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Cluster is what the catalog needs of Raft: to propose its commands, and
// whether this node leads (the nightly sync runs on the leader).
type Cluster interface {
	Apply(ctx context.Context, cmd raftfsm.Command) (uint64, error)
	IsLeader() bool
}

// Defaults of Config.
const (
	DefaultKeep      = 3
	DefaultInterval  = 24 * time.Hour
	DefaultFirstSync = 10 * time.Minute
	// DefaultMaxSourceBytes bounds a download (vendors' cloud images are
	// 300 MB to 1.5 GB).
	DefaultMaxSourceBytes = 16 << 30
	// DefaultMaxRawBytes bounds the disk an image describes.
	DefaultMaxRawBytes = 64 << 30
	// claimFor is how long a sync claim lasts before it is renewed; a
	// node that dies holding it frees it this long after its last renewal.
	claimFor   = 30 * time.Minute
	renewEvery = 10 * time.Minute
	// checkEvery is how often the timer looks whether a sync is due.
	checkEvery = time.Minute
)

// Config is what the catalog of one node needs. New checks it.
type Config struct {
	DB      *store.DB
	Cluster Cluster
	Blobs   *bootfiles.Blobs
	Node    string
	// WorkDir holds downloads and conversions while they run (DATA/os-work);
	// it is emptied at start.
	WorkDir string
	// From rollcall.json: os_sources (DefaultSources when nil), os_keep
	// (DefaultKeep when 0), os_sync_interval (DefaultInterval when 0; a
	// negative one turns the timer off).
	Sources  []Source
	Keep     int
	Interval time.Duration
	// FirstSync is how long after start the timer first looks
	// (DefaultFirstSync when 0).
	FirstSync      time.Duration
	MaxSourceBytes int64  // DefaultMaxSourceBytes when 0
	MaxRawBytes    int64  // DefaultMaxRawBytes when 0
	QemuImg        string // "qemu-img" when empty
	HTTPClient     *http.Client
	// WakeSync tells image sync a new blob is here (bootfiles.Server.WakeSync).
	WakeSync func()
	Now      func() time.Time
	Log      *slog.Logger
}

// Catalog syncs, imports and prunes the OS image catalog on one node.
type Catalog struct {
	cfg  Config
	http *http.Client
	log  *slog.Logger
	// busy serialises this node's imports and syncs: each holds gigabytes
	// of scratch space.
	busy sync.Mutex
	// downloads counts HTTP requests made (for tests and metrics).
	downloads counter
}

// New checks the configuration and prepares the work directory.
func New(cfg Config) (*Catalog, error) {
	switch {
	case cfg.DB == nil || cfg.Cluster == nil || cfg.Blobs == nil:
		return nil, errors.New("oscatalog: a store, a cluster and a blob store are required")
	case cfg.Node == "" || cfg.WorkDir == "":
		return nil, errors.New("oscatalog: a node name and a work directory are required")
	case cfg.Keep < 0:
		return nil, errors.New("oscatalog: os_keep must be 1 or more")
	}
	if cfg.Sources == nil {
		cfg.Sources = DefaultSources
	}
	if err := CheckSources(cfg.Sources); err != nil {
		return nil, err
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.FirstSync == 0 {
		cfg.FirstSync = DefaultFirstSync
	}
	if cfg.MaxSourceBytes == 0 {
		cfg.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if cfg.MaxRawBytes == 0 {
		cfg.MaxRawBytes = DefaultMaxRawBytes
	}
	if cfg.QemuImg == "" {
		cfg.QemuImg = "qemu-img"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.WakeSync == nil {
		cfg.WakeSync = func() {}
	}
	c := &Catalog{cfg: cfg, http: cfg.HTTPClient, log: cfg.Log}
	if c.http == nil {
		c.http = newHTTPClient()
	}
	// What a previous run left (a crash mid-import) is scratch.
	if err := os.RemoveAll(cfg.WorkDir); err != nil {
		return nil, fmt.Errorf("oscatalog: %w", err)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		return nil, fmt.Errorf("oscatalog: %w", err)
	}
	return c, nil
}

// Sources are the configured os_sources.
func (c *Catalog) Sources() []Source { return slices.Clone(c.cfg.Sources) }

// Downloads is how many HTTP requests the catalog has made.
func (c *Catalog) Downloads() int64 { return c.downloads.Load() }

func (c *Catalog) now() time.Time { return c.cfg.Now().UTC() }

// ImportRequest is an operator's import: a body (an upload) or a URL.
type ImportRequest struct {
	Name   string
	Family string
	URL    string    // fetched by this node when set
	Body   io.Reader // else the image itself
	// Source names where the body came from (a file name), for the record.
	Source string
}

// Import adds a version from an operator's image: a qcow2 or raw disk,
// told by its magic bytes. It becomes current unless the name is pinned.
func (c *Catalog) Import(ctx context.Context, req ImportRequest, progress func(Progress)) (store.OSVersion, error) {
	if err := store.ValidOSName(req.Name); err != nil {
		return store.OSVersion{}, err
	}
	if err := store.ValidOSFamily(req.Family); err != nil {
		return store.OSVersion{}, err
	}
	if (req.URL == "") == (req.Body == nil) {
		return store.OSVersion{}, store.Errorf(store.ErrInvalid, "an import takes either a URL or an uploaded file")
	}
	if req.URL != "" {
		if err := checkURL(req.URL); err != nil {
			return store.OSVersion{}, store.Errorf(store.ErrInvalid, "import URL: %s", err.Error())
		}
	}
	if !c.busy.TryLock() {
		return store.OSVersion{}, &Error{Kind: "conflict", Message: "this node is already importing or syncing an image: retry when it is done"}
	}
	defer c.busy.Unlock()
	progress = named(req.Name, progress)
	dir, err := os.MkdirTemp(c.cfg.WorkDir, "import-*")
	if err != nil {
		return store.OSVersion{}, internal("no scratch space for the import", err)
	}
	defer os.RemoveAll(dir)
	var src, source string
	if req.URL != "" {
		if src, err = c.downloadTo(ctx, req.URL, dir, progress); err != nil {
			return store.OSVersion{}, fetchFailure("download of "+fileName(req.URL), err)
		}
		source = req.URL
	} else {
		f, err := os.CreateTemp(dir, "upload-*")
		if err != nil {
			return store.OSVersion{}, internal("no scratch space for the import", err)
		}
		_, err = copyProgress(f, io.LimitReader(req.Body, c.cfg.MaxSourceBytes+1), "upload", 0, progress)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return store.OSVersion{}, invalid("the upload could not be received", err)
		}
		if st, _ := os.Stat(f.Name()); st != nil && st.Size() > c.cfg.MaxSourceBytes {
			return store.OSVersion{}, invalid(fmt.Sprintf("the upload is larger than the %s allowed", humanBytes(c.cfg.MaxSourceBytes)), nil)
		}
		src, source = f.Name(), filepath.Base(req.Source)
	}
	v, err := c.build(ctx, src, dir, progress)
	if err != nil {
		return store.OSVersion{}, err
	}
	v.Source = clipSource(source)
	return c.record(ctx, req.Name, req.Family, "", v, progress)
}

// build takes a downloaded or uploaded file to a blob: detect, inspect,
// convert (qcow2), compress. The version's name, source and upstream are
// the caller's.
func (c *Catalog) build(ctx context.Context, src, dir string, progress func(Progress)) (store.OSVersion, error) {
	d, err := detect(src)
	if err != nil {
		return store.OSVersion{}, err
	}
	report(progress, Progress{Step: "inspect", State: "running", Message: d.Format})
	info, err := c.inspect(ctx, src, d.Format)
	if err != nil {
		return store.OSVersion{}, err
	}
	if d.Format == FormatQCOW2 {
		if err := c.check(ctx, src); err != nil {
			return store.OSVersion{}, err
		}
	}
	report(progress, Progress{Step: "inspect", State: "done", Message: fmt.Sprintf("%s, %s disk", d.Format, humanBytes(info.VirtualSize))})
	raw := src
	if d.Format == FormatQCOW2 {
		raw = filepath.Join(dir, "disk.raw")
		if err := c.convert(ctx, src, raw, info.VirtualSize, progress); err != nil {
			return store.OSVersion{}, err
		}
		// The source is no longer needed: free its space before the
		// compressed copy takes more.
		os.Remove(src)
	}
	z, err := c.compress(ctx, raw, progress)
	if err != nil {
		return store.OSVersion{}, err
	}
	return store.OSVersion{
		File:    store.ImageFile{Name: raftfsm.OSFileName, Size: z.FileSize, SHA256: z.FileSHA256},
		RawSize: z.RawSize, RawSHA256: z.RawSHA256, SectorSize: d.SectorSize, Format: d.Format,
	}, nil
}

// record proposes the new version (current flips in the same command) and
// wakes image sync.
func (c *Catalog) record(ctx context.Context, name, family, track string, v store.OSVersion, progress func(Progress)) (store.OSVersion, error) {
	report(progress, Progress{Step: "record", State: "running"})
	now := c.now()
	var o store.OSImage
	err := c.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		o, err = tx.OSImage(name)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil {
		return store.OSVersion{}, err
	}
	v.Version = newVersionName(o, now)
	v.Imported = now
	cmd := &raftfsm.OSVersionAdd{Name: name, Family: family, Track: track, New: raftfsm.OSVersionBody(v), Node: c.cfg.Node, Now: now}
	if _, err := c.cfg.Cluster.Apply(ctx, cmd); err != nil {
		// The blob stays until blob GC finds no record names it.
		return store.OSVersion{}, err
	}
	c.cfg.WakeSync()
	v.Nodes = []string{c.cfg.Node}
	report(progress, Progress{Step: "record", State: "done", Message: "version " + v.Version})
	return v, nil
}

// newVersionName is the date of the import and a serial: 20261201-1,
// 20261201-2; names sort by import.
func newVersionName(o store.OSImage, now time.Time) string {
	day := now.Format("20060102")
	for n := 1; ; n++ {
		v := fmt.Sprintf("%s-%d", day, n)
		if _, ok := o.Version(v); !ok {
			return v
		}
	}
}

func clipSource(s string) string {
	if len(s) > 2048 {
		return s[:2048]
	}
	return s
}

// named stamps the catalog name on every report.
func named(name string, progress func(Progress)) func(Progress) {
	if progress == nil {
		return nil
	}
	return func(p Progress) {
		p.Name = name
		progress(p)
	}
}

// WaitReplicated reports, as step replicate, how many of the cluster's
// nodes hold the version, until all do or ctx ends.
func (c *Catalog) WaitReplicated(ctx context.Context, name, version string, progress func(Progress)) error {
	progress = named(name, progress)
	last := -1
	for {
		changed := c.cfg.DB.WatchTables(store.TableOSImages, store.TableCluster)
		var have, total int
		err := c.cfg.DB.View(func(tx *store.Tx) error {
			o, err := tx.OSImage(name)
			if err != nil {
				return err
			}
			v, ok := o.Version(version)
			if !ok {
				return store.Errorf(store.ErrNotFound, "OS image %s has no version %q", name, version)
			}
			nodes, err := tx.Nodes()
			for _, n := range nodes {
				total++
				if slices.Contains(v.Nodes, n.Name) {
					have++
				}
			}
			return err
		})
		if err != nil {
			return err
		}
		if have != last {
			last = have
			state := "running"
			if have >= total {
				state = "done"
			}
			report(progress, Progress{Step: "replicate", State: state, Bytes: int64(have), Total: int64(total), Message: fmt.Sprintf("%d of %d nodes hold it", have, total)})
		}
		if have >= total {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Prune removes the versions of a name beyond Keep: oldest first, never
// current, never younger than a day, never one a queued or running job
// uses. The state machine checks each again.
func (c *Catalog) Prune(ctx context.Context, name string) ([]string, error) {
	now := c.now()
	var drop []string
	err := c.cfg.DB.View(func(tx *store.Tx) error {
		o, err := tx.OSImage(name)
		if err != nil {
			return err
		}
		excess := len(o.Versions) - c.cfg.Keep
		for _, v := range o.Versions { // oldest first
			if excess <= 0 {
				break
			}
			if v.Version == o.Current || now.Sub(v.Imported) < raftfsm.OSPruneMinAge {
				continue
			}
			if job, err := tx.OSVersionInUse(name, v.Version); err != nil {
				return err
			} else if job != "" {
				continue
			}
			drop = append(drop, v.Version)
			excess--
		}
		return nil
	})
	if err != nil || len(drop) == 0 {
		return nil, err
	}
	if _, err := c.cfg.Cluster.Apply(ctx, &raftfsm.OSPrune{Name: name, Versions: drop, Keep: c.cfg.Keep, Now: now}); err != nil {
		return nil, err
	}
	c.log.Info("OS versions pruned", "os", name, "versions", strings.Join(drop, ","))
	return drop, nil
}
