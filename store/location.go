package store

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Physical location (issue 19, the spec's "Physical location"): building,
// room, rack, rack unit and asset tag on each machine, and the racks
// themselves, which are created on first use and can be resized. Units are
// numbered from 1 at the bottom, as DCIM tools and rack labels do; a
// machine at unit U of height H takes units U to U+H-1.

var bucketRacks = []byte("racks") // rack name → Rack

// TableRacks names the rack table for blocking queries and exports.
const TableRacks = "racks"

// Rack limits.
const (
	// DefaultRackHeight is a rack's height when it is created on first use.
	DefaultRackHeight = 42
	// MaxRackHeight is the tallest rack: the tallest sold are 58U.
	MaxRackHeight = 100
	// MaxLocationField bounds building, room, rack and asset tag.
	MaxLocationField = 64
)

// Location is where a machine stands. Every field is optional, but a unit
// needs a rack.
type Location struct {
	Building string `json:"building,omitempty"`
	Room     string `json:"room,omitempty"`
	Rack     string `json:"rack,omitempty"`
	// Unit is the lowest rack unit the machine takes (1 at the bottom); 0
	// when its place in the rack is not known.
	Unit int `json:"unit,omitempty"`
	// Height is how many units the machine takes; 0 means 1.
	Height   int    `json:"height,omitempty"`
	AssetTag string `json:"asset_tag,omitempty"`
}

// Units is how many rack units the machine takes.
func (l Location) Units() int { return max(l.Height, 1) }

// Top is the highest unit the machine takes (0 when it has no unit).
func (l Location) Top() int {
	if l.Unit == 0 {
		return 0
	}
	return l.Unit + l.Units() - 1
}

// Rack is a rack: where it stands and how tall it is.
type Rack struct {
	Name     string    `json:"name"`
	Building string    `json:"building,omitempty"`
	Room     string    `json:"room,omitempty"`
	Height   int       `json:"height"` // in units
	Created  time.Time `json:"created"`
	Index    uint64    `json:"index"`
}

var rackNamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$`)

// ValidRackName checks a rack name: what a rack label says (R12, A-03,
// hall-b.r7), since it is a key and stands in URLs and CSV files.
func ValidRackName(s string) error {
	if !rackNamePattern.MatchString(s) {
		return Errorf(ErrInvalid, "rack name %q must be letters, digits, '.', '_' or '-' (1 to 63, starting with a letter or digit)", Clip(s))
	}
	return nil
}

// checkPlace checks a building, room or asset tag: one line of printable
// text.
func checkPlace(what, s string) error {
	if len(s) > MaxLocationField || !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return Errorf(ErrInvalid, "%s %q must be at most %d bytes of UTF-8 without leading or trailing spaces", what, Clip(s), MaxLocationField)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return Errorf(ErrInvalid, "%s %q holds a control character", what, Clip(s))
		}
	}
	return nil
}

// CheckLocation checks a location's fields on their own (the rack's height
// and the other machines are CheckRack's).
func CheckLocation(l Location) error {
	for _, f := range []struct{ what, v string }{{"building", l.Building}, {"room", l.Room}, {"asset tag", l.AssetTag}} {
		if err := checkPlace(f.what, f.v); err != nil {
			return err
		}
	}
	if l.Rack != "" {
		if err := ValidRackName(l.Rack); err != nil {
			return err
		}
	}
	switch {
	case l.Unit < 0 || l.Unit > MaxRackHeight:
		return Errorf(ErrInvalid, "unit %d is not between 1 and %d", l.Unit, MaxRackHeight)
	case l.Height < 0 || l.Height > MaxRackHeight:
		return Errorf(ErrInvalid, "height %d is not between 1 and %d units", l.Height, MaxRackHeight)
	case l.Unit > 0 && l.Rack == "":
		return Errorf(ErrInvalid, "unit %d needs a rack", l.Unit)
	}
	return nil
}

// CheckRackRecord checks a rack's own fields.
func CheckRackRecord(r Rack) error {
	if err := ValidRackName(r.Name); err != nil {
		return err
	}
	if err := checkPlace("building", r.Building); err != nil {
		return err
	}
	if err := checkPlace("room", r.Room); err != nil {
		return err
	}
	if r.Height < 1 || r.Height > MaxRackHeight {
		return Errorf(ErrInvalid, "rack %s: height %d is not between 1 and %d units", r.Name, r.Height, MaxRackHeight)
	}
	return nil
}

// AdoptPlace gives a rack made on first use the building and room of a
// machine placed in it, when it has none yet: the first machines that say
// where they stand say where the rack stands.
func (r *Rack) AdoptPlace(l Location) {
	if r.Building == "" {
		r.Building = l.Building
	}
	if r.Room == "" && l.Building == r.Building {
		r.Room = l.Room
	}
}

// PlaceInRack is l in its rack r: a machine in a rack stands where the
// rack does, so an empty building or room is the rack's, and one that
// contradicts the rack's is refused.
func PlaceInRack(l Location, r Rack) (Location, error) {
	for _, f := range []struct {
		what       string
		mine, rack *string
	}{{"building", &l.Building, &r.Building}, {"room", &l.Room, &r.Room}} {
		switch {
		case *f.rack == "":
		case *f.mine == "":
			*f.mine = *f.rack
		case *f.mine != *f.rack:
			return l, Errorf(ErrConflict, "rack %s stands in %s %q, not %q (move the rack with rollcall location rack %s -%s …)",
				r.Name, f.what, *f.rack, *f.mine, r.Name, f.what)
		}
	}
	return l, nil
}

// Slot is one machine's place in a rack, for CheckRack.
type Slot struct {
	ID           string // the machine
	Unit, Height int    // as in Location
}

// RackConflict is one machine that does not fit a rack: past its top
// (Other is zero), or sharing a unit with Other.
type RackConflict struct {
	Slot, Other Slot
	Err         error // the refusal, naming both machines and their units
}

// RackConflicts lists the slots that do not fit a rack of this height:
// each machine with a unit past the top, and each that shares a unit with
// one lower down (once, with the one reaching highest). Slots without a
// unit take no place.
func RackConflicts(rack string, height int, slots []Slot) []RackConflict {
	var out []RackConflict
	placed := make([]Slot, 0, len(slots))
	for _, s := range slots {
		if s.Unit == 0 {
			continue
		}
		if slotTop(s) > height {
			out = append(out, RackConflict{Slot: s, Err: Errorf(ErrInvalid, "%s at %s in rack %s goes past its %dU", s.ID, unitSpan(s), rack, height)})
			continue
		}
		placed = append(placed, s)
	}
	slices.SortFunc(placed, func(a, b Slot) int {
		if a.Unit != b.Unit {
			return a.Unit - b.Unit
		}
		return strings.Compare(a.ID, b.ID)
	})
	// Sorted by first unit, a machine shares a unit with one before it
	// exactly when it starts at or below the highest top reached so far.
	var reach Slot
	for i, cur := range placed {
		if i > 0 && cur.Unit <= slotTop(reach) {
			out = append(out, RackConflict{Slot: cur, Other: reach, Err: Errorf(ErrConflict,
				"%s at %s and %s at %s in rack %s share a unit (give each machine its height: a 2U server takes two units)",
				reach.ID, unitSpan(reach), cur.ID, unitSpan(cur), rack)})
		}
		if i == 0 || slotTop(cur) > slotTop(reach) {
			reach = cur
		}
	}
	return out
}

// CheckRack checks that the slots fit a rack of this height: every
// machine with a unit within it, and no two sharing a unit. The refusal
// (RackConflicts' first) names both machines and their units. It is the
// one rule for LocationSet, RackPut and a CSV import's plan.
func CheckRack(rack string, height int, slots []Slot) error {
	if c := RackConflicts(rack, height, slots); len(c) > 0 {
		return c[0].Err
	}
	return nil
}

func slotTop(s Slot) int { return s.Unit + max(s.Height, 1) - 1 }

func unitSpan(s Slot) string {
	if max(s.Height, 1) == 1 {
		return fmt.Sprintf("U%d", s.Unit)
	}
	return fmt.Sprintf("U%d-%d", s.Unit, slotTop(s))
}

// Rack returns one rack.
func (t *Tx) Rack(name string) (Rack, error) { return getNamed[Rack](t, bucketRacks, "rack", name) }

// Racks lists racks by name.
func (t *Tx) Racks() ([]Rack, error) { return listNamed[Rack](t, bucketRacks) }

// PutRack writes a rack (its machines are the caller's to check).
func (t *Tx) PutRack(r Rack) error {
	r.Index = t.Index
	return t.putNamed(bucketRacks, TableRacks, r.Name, r)
}

// DeleteRack removes a rack record.
func (t *Tx) DeleteRack(name string) error {
	return t.deleteNamed(bucketRacks, TableRacks, "rack", name)
}

// MachineIDsInRack returns, sorted, the machines whose location names the
// rack.
func (t *Tx) MachineIDsInRack(name string) []string { return t.lookup(bucketMachineByRack, name) }

// MachinesInRack returns, sorted by ID, the machines whose location names
// the rack, through the rack index.
func (t *Tx) MachinesInRack(name string) ([]Machine, error) {
	return t.machinesByID(t.MachineIDsInRack(name))
}
