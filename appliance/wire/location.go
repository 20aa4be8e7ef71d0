package wire

import "time"

// Physical location and racks (issue 19, the spec's "Physical location").
// Units count from 1 at the bottom of a rack; a machine at unit U of
// height H takes units U to U+H-1.

// Location is where a machine stands. Every field is optional; a unit needs
// a rack.
type Location struct {
	Building string `json:"building,omitempty"`
	Room     string `json:"room,omitempty"`
	Rack     string `json:"rack,omitempty"`
	Unit     int    `json:"unit,omitempty"`   // the lowest unit it takes; 0: not known
	Height   int    `json:"height,omitempty"` // units it takes; 0 means 1
	Asset    string `json:"asset,omitempty"`  // the asset tag
}

// LocationRequest is PUT /api/v1/machines/{id}/location: the whole
// location (an empty field clears it). A machine in a rack stands where the
// rack does: an empty building or room is the rack's.
type LocationRequest struct {
	Building string `json:"building"`
	Room     string `json:"room"`
	Rack     string `json:"rack"`
	Unit     int    `json:"unit"`
	Height   int    `json:"height"`
	Asset    string `json:"asset"`
}

// BulkLocationRequest is POST /api/v1/locations: the same change for many
// machines, in one command. Machines names them (IDs or names), Tag names
// the machines that carry a tag; both may be given. A field left out (null)
// keeps each machine's value, an empty one clears it. A machine moved to
// another rack without a unit loses its unit in the old one.
type BulkLocationRequest struct {
	Machines []string `json:"machines"`
	Tag      string   `json:"tag"`
	Building *string  `json:"building"`
	Room     *string  `json:"room"`
	Rack     *string  `json:"rack"`
	Unit     *int     `json:"unit"`
	Height   *int     `json:"height"`
	Asset    *string  `json:"asset"`
}

// MachineLocation is one machine's place in an answer.
type MachineLocation struct {
	ID       string   `json:"id"`
	Name     string   `json:"name,omitempty"`
	Location Location `json:"location"`
}

// LocationsReply answers POST /api/v1/locations: every machine named, as
// it now stands.
type LocationsReply struct {
	Index    uint64            `json:"index"`
	Machines []MachineLocation `json:"machines"`
}

// ImportChange is one row of a location import that changes a machine.
type ImportChange struct {
	Line      int      `json:"line"`       // its line in the file (1 is the header)
	Machine   string   `json:"machine"`    // the machine's ID
	MatchedBy string   `json:"matched_by"` // the column that named it: id, serial, mac or node_name
	From      Location `json:"from"`
	To        Location `json:"to"`
}

// ImportError is one bad row of a location import.
type ImportError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// ImportReply answers POST /api/v1/locations/import[?dry=1]. A file with
// any bad row is refused whole (400, the error shape with Errors beside
// it); a dry run or a good file answers the changes. Rows that change
// nothing are counted in Unchanged.
type ImportReply struct {
	Changes   []ImportChange `json:"changes"`
	Errors    []ImportError  `json:"errors"`
	Unchanged int            `json:"unchanged"`
	NewRacks  []string       `json:"new_racks"` // racks the import makes (42U)
	// Applied says the changes were written (false on a dry run or when
	// nothing changes); Index is the Raft index of the last command.
	Applied bool   `json:"applied"`
	Index   uint64 `json:"index"`
	// Steps is how many commands carried the changes: 1 unless the import
	// was too large for one Raft entry.
	Steps int `json:"steps"`
}

// RackRequest is PUT /api/v1/racks/{name}: create a rack or change one. A
// height of 0 keeps a rack's (42U for a new one); a rack is never made
// lower than a machine it holds. Its machines stand where it stands.
type RackRequest struct {
	Building string `json:"building"`
	Room     string `json:"room"`
	Height   int    `json:"height"`
}

// Rack is a rack as the API shows it.
type Rack struct {
	Name     string    `json:"name"`
	Building string    `json:"building,omitempty"`
	Room     string    `json:"room,omitempty"`
	Height   int       `json:"height"` // in units
	Created  time.Time `json:"created"`
	Index    uint64    `json:"index"`
	// UsedUnits counts the units its placed machines take; Machines the
	// machines it holds, placed at a unit or not.
	UsedUnits int `json:"used_units"`
	Machines  int `json:"machines"`
}

// RackList is GET /api/v1/racks, by name.
type RackList struct {
	Index uint64 `json:"index"` // the racks table's change index
	Racks []Rack `json:"racks"`
}

// RackUnit is a machine in a rack's elevation.
type RackUnit struct {
	Unit    int    `json:"unit"`   // the lowest unit it takes (0 in Unplaced)
	Height  int    `json:"height"` // units it takes (at least 1)
	Machine string `json:"machine"`
	Name    string `json:"name,omitempty"`
	State   string `json:"state"`
}

// RackDetail is GET /api/v1/racks/{name}: the rack and its elevation, by
// unit from the bottom; Unplaced are its machines without a unit.
type RackDetail struct {
	Rack
	Elevation []RackUnit `json:"elevation"`
	Unplaced  []RackUnit `json:"unplaced"`
}
