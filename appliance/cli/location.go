package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/rollcall/rollcall/appliance/apiclient"
	"github.com/rollcall/rollcall/appliance/wire"
)

// The location verbs: where machines stand (one, or every machine of a
// tag, in one command), a site's CSV file, and the racks.

const locationUsage = "rollcall location ID|NAME|tag:NAME [-building B] [-room R] [-rack K] [-unit U] [-height H] [-asset A] | " +
	"import FILE.csv [-dry] | racks | rack NAME [-building B] [-room R] [-height H]  (each takes -json)"

// cmdLocation is `rollcall location …`.
func cmdLocation(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + locationUsage)
	}
	switch args[0] {
	case "import":
		return locationImport(args[1:], s)
	case "racks":
		return rackList.run(args[1:], s.stdout)
	case "rack":
		return locationRack(args[1:], s)
	}
	return locationSet(args, s)
}

// locationSet places one machine, or every machine of a tag, changing
// only the fields given (an empty one clears it). With no field it
// prints where the machines stand.
func locationSet(args []string, s streams) error {
	fs := newFlags("location", "rollcall location ID|NAME|tag:NAME [-building B] [-room R] [-rack K] [-unit U] [-height H] [-asset A] [-json]")
	building := fs.String("building", "", "building")
	room := fs.String("room", "", "room")
	rack := fs.String("rack", "", "rack (made on first use, 42U)")
	unit := fs.Int("unit", 0, "lowest rack unit the machine takes, from 1 at the bottom (0: not known)")
	height := fs.Int("height", 0, "rack units the machine takes (a 2U server: 2)")
	asset := fs.String("asset", "", "asset tag")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var req wire.BulkLocationRequest
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "building":
			req.Building = building
		case "room":
			req.Room = room
		case "rack":
			req.Rack = rack
		case "unit":
			req.Unit = unit
		case "height":
			req.Height = height
		case "asset":
			req.Asset = asset
		}
	})
	target := fs.Arg(0)
	if req.Building == nil && req.Room == nil && req.Rack == nil && req.Unit == nil && req.Height == nil && req.Asset == nil {
		return c.eachMachine(target, *asJSON, s.stdout, func(id string) outcome {
			return call(c, http.MethodGet, machinePath(id), nil, func(m wire.MachineDetail) string {
				return fmt.Sprintf("%s: %s", m.ID, placeText(m.Location))
			})
		})
	}
	if tag, ok := strings.CutPrefix(target, tagPrefix); ok {
		req.Tag = tag
	} else {
		req.Machines = []string{target}
	}
	return fetch(c, http.MethodPost, "/api/v1/locations", req, *asJSON, s.stdout, func(w io.Writer, r wire.LocationsReply) error {
		for _, m := range r.Machines {
			fmt.Fprintf(w, "%s: %s\n", m.ID, placeText(m.Location))
		}
		return nil
	})
}

// placeText is a location on one line: building › room › rack U24-25
// (asset A-0042).
func placeText(l wire.Location) string {
	var parts []string
	for _, p := range []string{l.Building, l.Room, l.Rack} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	s := strings.Join(parts, " › ")
	if l.Unit > 0 {
		s += " " + unitSpan(l.Unit, l.Height)
	}
	if l.Asset != "" {
		s = strings.TrimSpace(s + " (asset " + l.Asset + ")")
	}
	return dash(s)
}

func unitSpan(unit, height int) string {
	if height <= 1 {
		return fmt.Sprintf("U%d", unit)
	}
	return fmt.Sprintf("U%d-%d", unit, unit+height-1)
}

// locationImport is `location import FILE.csv [-dry] [-json]` ("-" reads
// standard input).
func locationImport(args []string, s streams) error {
	fs := newFlags("location import", "rollcall location import FILE.csv [-dry] [-json]")
	dry := fs.Bool("dry", false, "show what would change, change nothing")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	data, err := readInput(fs.Arg(0), s.stdin)
	if err != nil {
		return err
	}
	path := "/api/v1/locations/import"
	if *dry {
		path += "?dry=1"
	}
	var raw json.RawMessage
	if err := c.upload(http.MethodPost, path, bytes.NewReader(data), int64(len(data)), &raw); err != nil {
		return err
	}
	return present(raw, *asJSON, s.stdout, func(w io.Writer, r wire.ImportReply) error {
		for _, ch := range r.Changes {
			fmt.Fprintf(w, "line %d: %s (by %s): %s\n", ch.Line, ch.Machine, ch.MatchedBy, strings.Join(locationChanges(ch.From, ch.To), ", "))
		}
		for _, name := range r.NewRacks {
			fmt.Fprintf(w, "new rack %s (42U)\n", name)
		}
		rows := len(r.Changes) + r.Unchanged
		fmt.Fprintf(w, "%d %s: %d to change, %d unchanged, %d new %s", rows, plural(rows, "row", "rows"), len(r.Changes), r.Unchanged,
			len(r.NewRacks), plural(len(r.NewRacks), "rack", "racks"))
		switch {
		case r.Applied && r.Steps > 1:
			fmt.Fprintf(w, "; applied in %d steps, up to index %d\n", r.Steps, r.Index)
		case r.Applied:
			fmt.Fprintf(w, "; applied at index %d\n", r.Index)
		case *dry:
			fmt.Fprintln(w, " (dry run: nothing changed)")
		default:
			fmt.Fprintln(w, "; nothing to apply")
		}
		return nil
	})
}

// locationChanges are the fields that differ, as field "before" → "after".
func locationChanges(a, b wire.Location) []string {
	var out []string
	str := func(name, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %q → %q", name, x, y))
		}
	}
	num := func(name string, x, y int) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %d → %d", name, x, y))
		}
	}
	str("building", a.Building, b.Building)
	str("room", a.Room, b.Room)
	str("rack", a.Rack, b.Rack)
	num("unit", a.Unit, b.Unit)
	num("height", a.Height, b.Height)
	str("asset", a.Asset, b.Asset)
	return out
}

// locationRack is `location rack NAME`: the elevation, or with a flag the
// rack created or changed (only the flags given change).
func locationRack(args []string, s streams) error {
	fs := newFlags("location rack", "rollcall location rack NAME [-building B] [-room R] [-height H] [-json]")
	building := fs.String("building", "", "the building the rack stands in (its machines then stand there)")
	room := fs.String("room", "", "the room")
	height := fs.Int("height", 0, "height in units (never below a machine it holds)")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	path := "/api/v1/racks/" + url.PathEscape(fs.Arg(0))
	changed := false
	fs.Visit(func(f *flag.Flag) { changed = changed || f.Name != "json" && f.Name != "data" })
	if !changed {
		return fetch(c, http.MethodGet, path, nil, *asJSON, s.stdout, printElevation)
	}
	var req wire.RackRequest
	var cur wire.RackDetail
	err = c.do(http.MethodGet, path, nil, &cur)
	var ae *apiclient.Error
	switch {
	case err == nil:
		req = wire.RackRequest{Building: cur.Building, Room: cur.Room, Height: cur.Height}
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
	default:
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "building":
			req.Building = *building
		case "room":
			req.Room = *room
		case "height":
			req.Height = *height
		}
	})
	return fetch(c, http.MethodPut, path, req, *asJSON, s.stdout, printElevation)
}

var rackList = reader[wire.RackList]{name: "location racks", usage: "rollcall location racks [-json]", path: at("/api/v1/racks"),
	table: func(w io.Writer, l wire.RackList) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "RACK\tBUILDING\tROOM\tHEIGHT\tUSED\tMACHINES")
		for _, r := range l.Racks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%dU\t%dU\t%d\n", r.Name, dash(r.Building), dash(r.Room), r.Height, r.UsedUnits, r.Machines)
		}
		return tw.Flush()
	}}

// printElevation draws a rack from its top unit down: each machine on the
// row of its top unit, the units below that it takes marked, empty units
// dotted.
func printElevation(w io.Writer, d wire.RackDetail) error {
	where := strings.Join(nonEmpty(d.Building, d.Room), " › ")
	if where != "" {
		where = " in " + where
	}
	fmt.Fprintf(w, "rack %s%s: %dU, %dU used, %d %s\n", d.Name, where, d.Height, d.UsedUnits, d.Machines, plural(d.Machines, "machine", "machines"))
	top := map[int]wire.RackUnit{}
	taken := map[int]bool{}
	for _, u := range d.Elevation {
		top[u.Unit+max(u.Height, 1)-1] = u
		for k := u.Unit; k < u.Unit+max(u.Height, 1)-1; k++ {
			taken[k] = true
		}
	}
	tw := newTable(w)
	for k := d.Height; k >= 1; k-- {
		switch u, ok := top[k]; {
		case ok:
			size := ""
			if u.Height > 1 {
				size = fmt.Sprintf(" (%dU, from U%d)", u.Height, u.Unit)
			}
			fmt.Fprintf(tw, "U%d\t%s%s\t%s\t%s\n", k, u.Machine, size, dash(u.Name), u.State)
		case taken[k]:
			fmt.Fprintf(tw, "U%d\t│\n", k)
		default:
			fmt.Fprintf(tw, "U%d\t·\n", k)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(d.Unplaced) > 0 {
		fmt.Fprintln(w, "\nIn the rack, at no unit:")
		tw := newTable(w)
		for _, u := range d.Unplaced {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", u.Machine, dash(u.Name), u.State)
		}
		return tw.Flush()
	}
	return nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
