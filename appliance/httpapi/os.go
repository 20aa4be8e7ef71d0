package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/oscatalog"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The OS image catalog (issue 18). Sync and import are long: they answer
// with an NDJSON stream of progress lines and one result (or error) line,
// so the CLI and the web UI show every step. A refusal before any work
// started (a bad name, a sync already running) is a plain error answer and
// takes no Raft entry. The work runs under the request: a client that
// leaves cancels it, and the catalog is left as it was.

// replicateWait bounds how long a sync or import answer waits for every
// node to hold the new version (image sync keeps going after it).
const replicateWait = 30 * time.Minute

func (s *Server) osRoutes() []Route {
	b := s.cfg.Boot
	return []Route{
		{"GET", "/os/blobs/:sha256", AuthNone, "an OS image version's compressed raw disk (zstd), by its SHA-256; Range and HEAD supported", nil, bootHandler(b.ServeOSBlob)},
		{"HEAD", "/os/blobs/:sha256", AuthNone, "an OS image blob's size and ETag", nil, bootHandler(b.ServeOSBlob)},
		{"GET", "/api/v1/os", AuthAdmin, "the OS image catalog: names, current, track, family, versions with sizes, hashes, upstream checksum, import time, holders; the sync state (?index=&wait=)", nil, s.listOS},
		{"GET", "/api/v1/os/:name", AuthAdmin, "one OS image with its versions", nil, s.getOS},
		{"POST", "/api/v1/os/sync", AuthAdmin, "sync os_sources now (all, or names); answers an NDJSON stream of progress and the result", wire.OSSyncRequest{}, s.postOSSync},
		{"POST", "/api/v1/os/:name/import", AuthAdmin, "import a qcow2 or raw image: the body (?file=NAME for the record), or ?url= fetched by the node; ?family=debian|rhel; answers an NDJSON stream", nil, s.postOSImport},
		{"POST", "/api/v1/os/:name/promote", AuthAdmin, "make a version current", wire.OSPromoteRequest{}, s.postOSPromote},
		{"DELETE", "/api/v1/os/:name/:version", AuthAdmin, "remove a version (not one a job uses; not current while another exists)", nil, s.deleteOSVersion},
	}
}

func (s *Server) catalog() (*oscatalog.Catalog, error) {
	if s.cfg.OS == nil {
		return nil, Errorf(http.StatusServiceUnavailable, "unavailable", "this node runs no OS catalog")
	}
	return s.cfg.OS, nil
}

func wireOSImage(o store.OSImage) wire.OSImage {
	out := wire.OSImage{Name: o.Name, Family: o.Family, Track: o.Track, Current: o.Current, Index: o.Index}
	for _, v := range o.Versions {
		out.Versions = append(out.Versions, wireOSVersion(v, o.Current))
	}
	return out
}

func wireOSVersion(v store.OSVersion, current string) wire.OSVersion {
	return wire.OSVersion{
		Version: v.Version, SHA256: v.File.SHA256, Size: v.File.Size, RawSHA256: v.RawSHA256, RawSize: v.RawSize,
		SectorSize: v.SectorSize, Upstream: v.Upstream, Source: v.Source, Format: v.Format, Imported: v.Imported,
		Nodes: slices.Clone(v.Nodes), Current: v.Version == current,
	}
}

func (s *Server) listOS(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableOSImages); err != nil {
		return err
	}
	out := wire.OSList{Images: []wire.OSImage{}, Sources: []string{}}
	if s.cfg.OS != nil {
		for _, src := range s.cfg.OS.Sources() {
			out.Sources = append(out.Sources, src.Name)
		}
	}
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableOSImages)
		images, err := tx.OSImages()
		if err != nil {
			return err
		}
		out.Images = nonNil(convert(images, wireOSImage))
		st, err := tx.OSSyncState()
		if err != nil {
			return err
		}
		out.Sync = wireOSSync(st)
		nodes, err := tx.Nodes()
		out.Nodes = len(nodes)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func wireOSSync(st store.OSSync) wire.OSSync {
	return wire.OSSync{Node: st.Node, Started: st.Started, Running: st.Running(time.Now()), Timer: st.Timer,
		Finished: st.Finished, Result: st.Result, Error: st.Error}
}

func (s *Server) respondOS(c *gin.Context, status int, name string) error {
	var o store.OSImage
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		o, err = tx.OSImage(name)
		return err
	}); err != nil {
		return err
	}
	c.JSON(status, wireOSImage(o))
	return nil
}

func (s *Server) getOS(c *gin.Context) error {
	if err := store.ValidOSName(c.Param("name")); err != nil {
		return err
	}
	return s.respondOS(c, http.StatusOK, c.Param("name"))
}

func (s *Server) postOSPromote(c *gin.Context) error {
	var req wire.OSPromoteRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if err := store.ValidOSName(c.Param("name")); err != nil {
		return err
	}
	if err := store.ValidOSVersion(req.Version); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.OSPromote{Name: c.Param("name"), OSVersion: req.Version, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	return s.respondOS(c, http.StatusOK, c.Param("name"))
}

func (s *Server) deleteOSVersion(c *gin.Context) error {
	name, version := c.Param("name"), c.Param("version")
	if err := store.ValidOSName(name); err != nil {
		return err
	}
	if err := store.ValidOSVersion(version); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.OSVersionRemove{Name: name, OSVersion: version, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: name + "/" + version})
	return nil
}

// osStream writes the NDJSON answer: nothing until the first line, so a
// refusal before any progress is still a plain error with its status.
type osStream struct {
	c       *gin.Context
	mu      sync.Mutex
	started bool
}

func (st *osStream) line(l wire.OSStreamLine) {
	st.mu.Lock()
	defer st.mu.Unlock()
	w := st.c.Writer
	if !st.started {
		st.started = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
	}
	b, _ := json.Marshal(l)
	w.Write(append(b, '\n'))
	w.Flush()
}

func (st *osStream) progress(p oscatalog.Progress) {
	st.line(wire.OSStreamLine{Progress: &wire.OSProgress{Name: p.Name, Step: p.Step, State: p.State, Bytes: p.Bytes, Total: p.Total, Message: p.Message}})
}

// finish ends the stream with the result or the error; before any line,
// an error is the handler's to return.
func (st *osStream) finish(s *Server, res *wire.OSResult, err error) error {
	st.mu.Lock()
	started := st.started
	st.mu.Unlock()
	if err != nil && !started {
		return err
	}
	if err != nil {
		e := classify(err, s.failer.Classifiers)
		level := slog.LevelDebug
		if e.Status >= 500 {
			level = slog.LevelError
		}
		s.log.Log(st.c.Request.Context(), level, "request failed", "route", st.c.FullPath(), "request_id", st.c.GetString(ctxRequestID), "status", e.Status, "err", err)
		st.line(wire.OSStreamLine{Error: &wire.ErrorDetail{Code: e.Code, Message: e.Message}})
		return nil
	}
	st.line(wire.OSStreamLine{Result: res})
	return nil
}

// osErrors are the catalog's failures, with the message it wrote.
func osErrors(err error) *Error {
	var oe *oscatalog.Error
	if !errors.As(err, &oe) {
		return nil
	}
	switch oe.Kind {
	case "invalid":
		return &Error{Status: http.StatusBadRequest, Code: "bad_image", Message: oe.Message, cause: err}
	case "conflict":
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: oe.Message, cause: err}
	case "upstream":
		return &Error{Status: http.StatusBadGateway, Code: "upstream", Message: oe.Message, cause: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: oe.Message, cause: err}
}

func (s *Server) postOSSync(c *gin.Context) error {
	cat, err := s.catalog()
	if err != nil {
		return err
	}
	var req wire.OSSyncRequest
	if c.Request.ContentLength != 0 {
		if err := decodeBody(c, maxBodyBytes, &req); err != nil {
			return err
		}
	}
	if len(req.Names) > 64 {
		return BadRequest("at most 64 names")
	}
	st := &osStream{c: c}
	results, err := cat.Sync(c.Request.Context(), oscatalog.SyncRequest{Names: req.Names, Force: req.Force}, st.progress)
	if err != nil {
		return st.finish(s, nil, err)
	}
	res := &wire.OSResult{}
	for _, r := range results {
		if r.Action == oscatalog.SyncNew {
			s.waitReplicated(c.Request.Context(), cat, r.Name, r.Version, st)
		}
		res.Sync = append(res.Sync, wire.OSSyncResult{Name: r.Name, Action: r.Action, Version: r.Version, Upstream: r.Upstream,
			Current: r.Current, Pruned: r.Pruned, Message: r.Message, Nodes: s.osHolders(r.Name, r.Version)})
	}
	return st.finish(s, res, nil)
}

func (s *Server) waitReplicated(ctx context.Context, cat *oscatalog.Catalog, name, version string, st *osStream) {
	ctx, cancel := context.WithTimeout(ctx, replicateWait)
	defer cancel()
	if err := cat.WaitReplicated(ctx, name, version, st.progress); err != nil && ctx.Err() == nil {
		s.log.Warn("OS replication wait ended", "os", name, "version", version, "err", err)
	}
}

func (s *Server) osHolders(name, version string) []string {
	var nodes []string
	s.cfg.DB.View(func(tx *store.Tx) error {
		if o, err := tx.OSImage(name); err == nil {
			if v, ok := o.Version(version); ok {
				nodes = v.Nodes
			}
		}
		return nil
	})
	return nodes
}

func (s *Server) postOSImport(c *gin.Context) error {
	cat, err := s.catalog()
	if err != nil {
		return err
	}
	name := c.Param("name")
	if err := store.ValidOSName(name); err != nil {
		return err
	}
	req := oscatalog.ImportRequest{Name: name, Family: c.Query("family"), URL: c.Query("url"), Source: c.Query("file")}
	if err := store.ValidOSFamily(req.Family); err != nil {
		return err
	}
	hasBody := c.Request.ContentLength > 0 || (c.Request.ContentLength < 0 && c.Request.Body != nil && c.Request.Body != http.NoBody)
	switch {
	case req.URL != "" && hasBody:
		return BadRequest("an import takes either ?url= or a body, not both")
	case req.URL == "" && !hasBody:
		return BadRequest("an import needs the image as the body, or ?url=")
	case req.URL != "":
		if err := oscatalog.CheckURL(req.URL); err != nil {
			return BadRequest("url: %s", err.Error())
		}
	default:
		req.Body = c.Request.Body
	}
	if len(req.Source) > 255 {
		return BadRequest("file: at most 255 bytes")
	}
	st := &osStream{c: c}
	progress := st.progress
	if req.Body != nil {
		// HTTP/1.1 loses the rest of a request body once the answer has
		// begun: nothing is written while the upload arrives (the client
		// shows its own upload progress), the stream starts after it.
		progress = func(p oscatalog.Progress) {
			if p.Step != "upload" {
				st.progress(p)
			}
		}
	}
	v, err := cat.Import(c.Request.Context(), req, progress)
	if err != nil {
		return st.finish(s, nil, err)
	}
	s.waitReplicated(c.Request.Context(), cat, name, v.Version, st)
	var o store.OSImage
	s.cfg.DB.View(func(tx *store.Tx) error { o, _ = tx.OSImage(name); return nil })
	if got, ok := o.Version(v.Version); ok {
		v = got
	}
	wv := wireOSVersion(v, o.Current)
	return st.finish(s, &wire.OSResult{Name: name, Version: &wv}, nil)
}
