package httpapi

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/locationcsv"
)

// Physical location and racks (issue 19): one machine's place, the same
// change for many machines (by ID, name or tag), a site's CSV export, and
// the racks with their elevations. Every placement is one LocationSet,
// checked on the local copy first (the leader's precheck) and again by the
// state machine, whose refusal names the machines and units in conflict.

// Bounds of what an operator sends at once.
const (
	// maxImportBytes and maxImportRows bound a location import: a site's
	// fleet, ten thousand machines, twice over.
	maxImportBytes = 4 << 20
	maxImportRows  = 20_000
	// maxBulkMachines bounds a bulk placement (POST /api/v1/locations).
	maxBulkMachines = 20_000
)

// maxLocationEntry is the largest LocationSet this node proposes: the
// cluster forwards entries of up to 16 MiB to the leader. Placements that
// encode larger go in steps. (A variable for the tests' sake.)
var maxLocationEntry = 12 << 20

func (s *Server) locationRoutes() []Route {
	return []Route{
		{"PUT", "/api/v1/machines/:id/location", AuthAdmin, "set a machine's whole location: building, room, rack, unit, height, asset (an empty field clears it)", wire.LocationRequest{}, s.putLocation},
		{"POST", "/api/v1/locations", AuthAdmin, "the same location change for many machines (IDs and/or every machine of a tag) in one command; fields left out are kept", wire.BulkLocationRequest{}, s.postLocations},
		{"POST", "/api/v1/locations/import", AuthAdmin, "import a location CSV (text/csv body; header required; rows by id, serial, mac or node_name; at most 4 MiB, 20,000 rows; ?dry=1 changes nothing); any bad row refuses the whole file", nil, s.importLocations},
		{"GET", "/api/v1/racks", AuthAdmin, "racks with their used units and machine counts (?index=&wait= ?min_index=)", nil, s.listRacks},
		{"GET", "/api/v1/racks/:name", AuthAdmin, "a rack and its elevation: each machine at its unit, with its height and state", nil, s.getRack},
		{"PUT", "/api/v1/racks/:name", AuthAdmin, "create a rack or change one: building, room, height (never below a machine it holds)", wire.RackRequest{}, s.putRack},
		{"DELETE", "/api/v1/racks/:name", AuthAdmin, "forget a rack that holds no machine", nil, s.deleteRack},
	}
}

func storeLocation(l wire.LocationRequest) store.Location {
	return store.Location{Building: l.Building, Room: l.Room, Rack: l.Rack, Unit: l.Unit, Height: l.Height, AssetTag: l.Asset}
}

func (s *Server) putLocation(c *gin.Context) error {
	var req wire.LocationRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	loc := storeLocation(req)
	if err := store.CheckLocation(loc); err != nil {
		return err
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	idx, _, err := s.proposeLocations(c.Request.Context(), []raftfsm.MachineLocation{{ID: m.ID, Location: raftfsm.LocationBody(loc)}}, now)
	if err != nil {
		return err
	}
	// Rules may read where a machine stands.
	_, at, err := s.followAutoTags(c.Request.Context(), []string{m.ID}, nil, now)
	if err != nil {
		return err
	}
	return s.respondMachine(c, http.StatusOK, m.ID, max(idx, at))
}

func (s *Server) postLocations(c *gin.Context) error {
	var req wire.BulkLocationRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Machines) == 0 && req.Tag == "" {
		return FieldError("machines", "name the machines (machines: IDs or names) or a tag (tag) to place")
	}
	if req.Building == nil && req.Room == nil && req.Rack == nil && req.Unit == nil && req.Height == nil && req.Asset == nil {
		return FieldError("building", "give a field to set: building, room, rack, unit, height or asset (an empty one clears it)")
	}
	if req.Tag != "" {
		if err := store.ValidTagName(req.Tag); err != nil {
			return FieldError("tag", "%s", store.Public(err))
		}
	}
	if len(req.Machines) > maxBulkMachines {
		return FieldError("machines", "%d machines is more than the %d one placement may name", len(req.Machines), maxBulkMachines)
	}
	if err := s.minIndex(c); err != nil {
		return err
	}
	var placed []raftfsm.MachineLocation
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		seen := map[string]bool{}
		var ms []store.Machine
		for _, ref := range req.Machines {
			m, err := tx.MachineByRef(ref)
			if err != nil {
				return err
			}
			if !seen[m.ID] {
				seen[m.ID] = true
				ms = append(ms, m)
			}
		}
		if req.Tag != "" {
			if _, err := tx.Tag(req.Tag); errors.Is(err, store.ErrNotFound) {
				return FieldError("tag", "no tag %s; create it with rollcall tags add %s", req.Tag, req.Tag)
			} else if err != nil {
				return err
			}
			ids := tx.MachineIDsByTag(req.Tag)
			if len(ids) == 0 {
				return FieldError("tag", "no machine carries tag %s", req.Tag)
			}
			for _, id := range ids {
				if seen[id] {
					continue
				}
				m, err := tx.Machine(id)
				if err != nil {
					return err
				}
				seen[id] = true
				ms = append(ms, m)
			}
		}
		if len(ms) > maxBulkMachines {
			return FieldError("tag", "%d machines is more than the %d one placement may name", len(ms), maxBulkMachines)
		}
		slices.SortFunc(ms, func(a, b store.Machine) int { return strings.Compare(a.ID, b.ID) })
		for _, m := range ms {
			loc := bulkChange(m.Location, req)
			if err := store.CheckLocation(loc); err != nil {
				return store.Errorf(store.ErrInvalid, "machine %s: %s", m.ID, store.Public(err))
			}
			placed = append(placed, raftfsm.MachineLocation{ID: m.ID, Location: raftfsm.LocationBody(loc)})
		}
		return nil
	}); err != nil {
		return err
	}
	now := time.Now().UTC()
	idx, _, err := s.proposeLocations(c.Request.Context(), placed, now)
	if err != nil {
		return err
	}
	ids := make([]string, len(placed))
	for i, p := range placed {
		ids[i] = p.ID
	}
	_, at, err := s.followAutoTags(c.Request.Context(), ids, nil, now)
	if err != nil {
		return err
	}
	idx = max(idx, at)
	ans := wire.LocationsReply{Index: idx, Machines: []wire.MachineLocation{}}
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		for _, id := range ids {
			m, err := tx.Machine(id)
			if err != nil {
				return err
			}
			ans.Machines = append(ans.Machines, wire.MachineLocation{ID: m.ID, Name: m.Name, Location: wireLocation(m.Location)})
		}
		return nil
	}); err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, ans)
	return nil
}

// bulkChange is a machine's location with the fields a bulk request gives.
// A machine moved to another rack without a unit does not keep its unit
// in the rack it left (as an import has it).
func bulkChange(l store.Location, req wire.BulkLocationRequest) store.Location {
	before := l.Rack
	for _, f := range []struct {
		v   *string
		dst *string
	}{{req.Building, &l.Building}, {req.Room, &l.Room}, {req.Rack, &l.Rack}, {req.Asset, &l.AssetTag}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if req.Unit != nil {
		l.Unit = *req.Unit
	} else if l.Rack != before {
		l.Unit = 0
	}
	if req.Height != nil {
		l.Height = *req.Height
	}
	return l
}

// proposeLocations places machines in one LocationSet, or, when that would
// not fit one Raft entry, in steps of machines in the order given (each
// step checked by the state machine on its own). It returns the last
// index and how many commands it took. A step refused after others were
// applied says how far the placement got.
func (s *Server) proposeLocations(ctx context.Context, ms []raftfsm.MachineLocation, now time.Time) (uint64, int, error) {
	steps := [][]raftfsm.MachineLocation{ms}
	b, err := raftfsm.Encode(&raftfsm.LocationSet{Machines: ms, Now: now})
	if err != nil {
		return 0, 0, err
	}
	if len(b) > maxLocationEntry {
		n := len(b)/maxLocationEntry + 1
		size := (len(ms) + n - 1) / n
		steps = nil
		for start := 0; start < len(ms); start += size {
			steps = append(steps, ms[start:min(start+size, len(ms))])
		}
	}
	var last uint64
	for i, step := range steps {
		idx, err := s.cfg.Cluster.Apply(ctx, &raftfsm.LocationSet{Machines: step, Now: now})
		if err != nil {
			if i == 0 {
				return 0, 0, err
			}
			e := classify(err, s.failer.Classifiers)
			return last, i, &Error{Status: e.Status, Code: e.Code, cause: err,
				Message: fmt.Sprintf("too large for one command, the placement went in %d steps: %d applied (up to index %d), then step %d was refused: %s",
					len(steps), i, last, i+1, e.Message)}
		}
		last = idx
	}
	return last, len(steps), nil
}

func (s *Server) importLocations(c *gin.Context) error {
	dry := false
	switch c.Query("dry") {
	case "", "0", "false":
	case "1", "true":
		dry = true
	default:
		return BadRequest("dry must be 1 or 0")
	}
	if ct := c.GetHeader("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "text/csv" && mt != "text/plain" && mt != "application/octet-stream") {
			return Errorf(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the location file as text/csv, not %s", store.Clip(ct))
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxImportBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return Errorf(http.StatusRequestEntityTooLarge, "too_large", "the location file is larger than the %d MiB allowed: split it", maxImportBytes>>20)
		}
		return Wrap(http.StatusBadRequest, "bad_request", "cannot read the location file", err)
	}
	if rows := countRecords(body) - 1; rows > maxImportRows {
		return BadRequest("the location file has %d rows, more than the %d an import may have: split it", rows, maxImportRows)
	}
	if err := s.minIndex(c); err != nil {
		return err
	}
	var plan *locationcsv.Plan
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		plan, err = locationcsv.Parse(bytes.NewReader(body), tx)
		return err
	}); err != nil {
		var rows *locationcsv.Errors
		if errors.As(err, &rows) {
			e := &Error{Status: http.StatusBadRequest, Code: "bad_rows", Message: store.Public(err), cause: err, Rows: []wire.ImportError{}}
			for _, r := range rows.Rows {
				e.Rows = append(e.Rows, wire.ImportError{Line: r.Line, Error: r.Msg})
			}
			return e
		}
		return err
	}
	changed := plan.Changed()
	ans := wire.ImportReply{Changes: []wire.ImportChange{}, Errors: []wire.ImportError{}, NewRacks: []string{},
		Unchanged: len(plan.Entries) - len(changed)}
	for _, e := range changed {
		ans.Changes = append(ans.Changes, wire.ImportChange{Line: e.Line, Machine: e.Machine, MatchedBy: e.Key, From: wireLocation(e.Before), To: wireLocation(e.After)})
	}
	for _, r := range plan.Racks {
		ans.NewRacks = append(ans.NewRacks, r.Name)
	}
	if !dry && len(changed) > 0 {
		now := time.Now().UTC()
		ms := make([]raftfsm.MachineLocation, len(changed))
		ids := make([]string, len(changed))
		for i, e := range changed {
			ms[i] = raftfsm.MachineLocation{ID: e.Machine, Location: raftfsm.LocationBody(e.After)}
			ids[i] = e.Machine
		}
		idx, steps, err := s.proposeLocations(c.Request.Context(), ms, now)
		if err != nil {
			return err
		}
		ans.Applied, ans.Index, ans.Steps = true, idx, steps
		slices.Sort(ids)
		_, at, err := s.followAutoTags(c.Request.Context(), ids, nil, now)
		if err != nil {
			return err
		}
		ans.Index = max(ans.Index, at)
	}
	if ans.Index > 0 {
		setIndex(c, ans.Index)
	}
	c.JSON(http.StatusOK, ans)
	return nil
}

// countRecords counts a CSV file's records (the header too), up to the
// first one that does not parse (the plan reports it): a file of too many
// rows is refused for its size before each of its rows is looked up.
func countRecords(body []byte) int {
	r := csv.NewReader(bytes.NewReader(body))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	n := 0
	for {
		if _, err := r.Read(); err != nil {
			return n
		}
		n++
	}
}

// ---- racks

func (s *Server) listRacks(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	if err := s.blockingQuery(c, store.TableRacks); err != nil {
		return err
	}
	var l wire.RackList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		l.Index = tx.TableIndex(store.TableRacks)
		racks, err := tx.Racks()
		if err != nil {
			return err
		}
		for _, r := range racks {
			d, err := rackDetail(tx, r)
			if err != nil {
				return err
			}
			l.Racks = append(l.Racks, d.Rack)
		}
		return nil
	}); err != nil {
		return err
	}
	l.Racks = nonNil(l.Racks)
	setIndex(c, l.Index)
	c.JSON(http.StatusOK, l)
	return nil
}

// rackDetail is a rack with its elevation, by unit from the bottom, and
// its machines without a unit, by ID.
func rackDetail(tx *store.Tx, r store.Rack) (wire.RackDetail, error) {
	d := wire.RackDetail{Rack: wireRack(r), Elevation: []wire.RackUnit{}, Unplaced: []wire.RackUnit{}}
	ms, err := tx.MachinesInRack(r.Name)
	if err != nil {
		return d, err
	}
	d.Machines = len(ms)
	for _, m := range ms {
		u := wire.RackUnit{Unit: m.Location.Unit, Height: m.Location.Units(), Machine: m.ID, Name: m.Name, State: m.State}
		if u.Unit == 0 {
			d.Unplaced = append(d.Unplaced, u)
			continue
		}
		d.UsedUnits += u.Height
		d.Elevation = append(d.Elevation, u)
	}
	slices.SortFunc(d.Elevation, func(a, b wire.RackUnit) int {
		if a.Unit != b.Unit {
			return a.Unit - b.Unit
		}
		return strings.Compare(a.Machine, b.Machine)
	})
	return d, nil
}

func (s *Server) getRack(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	var d wire.RackDetail
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		r, err := tx.Rack(c.Param("name"))
		if err != nil {
			return err
		}
		d, err = rackDetail(tx, r)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, d.Index)
	c.JSON(http.StatusOK, d)
	return nil
}

func (s *Server) putRack(c *gin.Context) error {
	var req wire.RackRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	name := c.Param("name")
	if err := store.ValidRackName(name); err != nil {
		return err
	}
	if req.Height < 0 || req.Height > store.MaxRackHeight {
		return FieldError("height", "height %d is not between 1 and %d units (0 keeps the rack's)", req.Height, store.MaxRackHeight)
	}
	if err := s.minIndex(c); err != nil {
		return err
	}
	rack := raftfsm.Rack{Name: name, Building: req.Building, Room: req.Room, Height: req.Height}
	var held []string
	created := false
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		old, err := tx.Rack(name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			created = true
			if rack.Height == 0 {
				rack.Height = store.DefaultRackHeight
			}
		case err != nil:
			return err
		case rack.Height == 0:
			rack.Height = old.Height
		}
		held = tx.MachineIDsInRack(name)
		return nil
	}); err != nil {
		return err
	}
	now := time.Now().UTC()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.RackPut{Rack: rack, Now: now})
	if err != nil {
		// A rack refuses a change only for a height below the machines
		// it holds: that is the field to correct.
		return onField(err, "height", "conflict")
	}
	// Its machines stand where it does, which rules may read.
	_, at, err := s.followAutoTags(c.Request.Context(), held, nil, now)
	if err != nil {
		return err
	}
	idx = max(idx, at)
	var d wire.RackDetail
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		r, err := tx.Rack(name)
		if err != nil {
			return err
		}
		d, err = rackDetail(tx, r)
		return err
	}); err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	setIndex(c, idx)
	c.JSON(status, d)
	return nil
}

func (s *Server) deleteRack(c *gin.Context) error {
	name := c.Param("name")
	if err := store.ValidRackName(name); err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.RackDelete{Name: name})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: name})
	return nil
}
