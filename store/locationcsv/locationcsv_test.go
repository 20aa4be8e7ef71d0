package locationcsv

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/fleet"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func id(i int) string { return fmt.Sprintf("m-%012x", i+1) }

// site is a store with ten machines of the fleet simulator, as
// commissioning leaves them (serial, MACs, summary), two of them boards
// with one serial (Supermicro's placeholder that firmware leaves in), some
// named, and rack R12 of DC1, Hall A holding machine 5 at U24 (2U).
func site(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *store.Tx) error {
		tx.Index = 1
		if err := tx.PutRack(store.Rack{Name: "R12", Building: "DC1", Room: "Hall A", Height: 42, Created: t0}); err != nil {
			return err
		}
		for i := range 10 {
			rep := fleet.Generate(1, i)
			m := store.Machine{ID: id(i), State: store.StateReady, Serial: rep.System.Serial, MACs: inventory.MACs(&rep),
				BootMAC: rep.BootMAC, Summary: inventory.Summarize(&rep), CreatedAt: t0}
			switch i {
			case 3:
				m.Name = "gpu-03"
			case 5:
				m.Location = store.Location{Building: "DC1", Room: "Hall A", Rack: "R12", Unit: 24, Height: 2, AssetTag: "A-0005"}
			case 8, 9:
				m.Serial = "0123456789"
			}
			if err := tx.PutMachine(m); err != nil {
				return err
			}
		}
		return tx.SetApplied(1, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func plan(t testing.TB, db *store.DB, file string) (*Plan, error) {
	t.Helper()
	var p *Plan
	var perr error
	db.View(func(tx *store.Tx) error {
		p, perr = Parse(strings.NewReader(file), tx)
		return nil
	})
	return p, perr
}

func serialOf(i int) string { return fleet.Generate(1, i).System.Serial }

// macOf is machine i's boot MAC as a DCIM export may write it: upper case
// with dashes.
func macOf(i int) string {
	return strings.ToUpper(strings.ReplaceAll(fleet.Generate(1, i).BootMAC, ":", "-"))
}

// A good file: rows matched by each key, racks made on first use, the
// machines left out of the file untouched, and the dry run's diff.
func TestGoodFile(t *testing.T) {
	db := site(t)
	file := "\ufeffID,Serial, MAC ,node_name,building,room,rack,unit,height,asset_tag\r\n" +
		id(0) + ",,,,DC1,Hall A,R12,1,1,A-0001\r\n" +
		"," + serialOf(1) + ",,,DC1,Hall A,R12,2,,A-0002\r\n" +
		",," + macOf(2) + ",,DC1,Hall B,R7,10,6,A-0003\r\n" +
		",,,GPU-03,DC1,Hall B,R7,16,6,A-0004\r\n" +
		id(4) + "," + serialOf(4) + ",,,,,R12,40,,\r\n" + // both keys agree; building and room from the rack
		id(5) + ",,,,DC1,Hall A,R12,24,2,A-0005\r\n" // as it stands: unchanged
	p, err := plan(t, db, file)
	if err != nil {
		t.Fatal(err)
	}
	r12 := store.Location{Building: "DC1", Room: "Hall A", Rack: "R12"}
	r7 := store.Location{Building: "DC1", Room: "Hall B", Rack: "R7"}
	with := func(l store.Location, unit, height int, asset string) store.Location {
		l.Unit, l.Height, l.AssetTag = unit, height, asset
		return l
	}
	want := []Entry{
		{Line: 2, Machine: id(0), Key: "id", After: with(r12, 1, 1, "A-0001")},
		{Line: 3, Machine: id(1), Key: "serial", After: with(r12, 2, 0, "A-0002")},
		{Line: 4, Machine: id(2), Key: "mac", After: with(r7, 10, 6, "A-0003")},
		{Line: 5, Machine: id(3), Key: "node_name", After: with(r7, 16, 6, "A-0004")},
		{Line: 6, Machine: id(4), Key: "id", After: with(r12, 40, 0, "")},
		{Line: 7, Machine: id(5), Key: "id", Before: with(r12, 24, 2, "A-0005"), After: with(r12, 24, 2, "A-0005")},
	}
	if d := cmp.Diff(want, p.Entries); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]store.Rack{{Name: "R7", Building: "DC1", Room: "Hall B", Height: 42}}, p.Racks); d != "" {
		t.Errorf("new racks (-want +got):\n%s", d)
	}
	if len(p.Changed()) != 5 {
		t.Errorf("%d changed, want 5", len(p.Changed()))
	}
	wantDiff := `line 2: m-000000000001: building "" → "DC1", room "" → "Hall A", rack "" → "R12", unit 0 → 1, height 0 → 1, asset tag "" → "A-0001"
line 3: m-000000000002: building "" → "DC1", room "" → "Hall A", rack "" → "R12", unit 0 → 2, asset tag "" → "A-0002"
line 4: m-000000000003: building "" → "DC1", room "" → "Hall B", rack "" → "R7", unit 0 → 10, height 0 → 6, asset tag "" → "A-0003"
line 5: m-000000000004: building "" → "DC1", room "" → "Hall B", rack "" → "R7", unit 0 → 16, height 0 → 6, asset tag "" → "A-0004"
line 6: m-000000000005: building "" → "DC1", room "" → "Hall A", rack "" → "R12", unit 0 → 40
new rack R7: 42U in DC1 › Hall B
6 rows, 5 to change, 1 unchanged, 1 new rack
`
	if d := cmp.Diff(wantDiff, p.Diff()); d != "" {
		t.Errorf("diff (-want +got):\n%s", d)
	}

	// Only some columns: the others keep the machine's values; a machine
	// moved to another rack without a unit loses the old one.
	p, err = plan(t, db, "node_name,asset_tag\ngpu-03,A-9999\n")
	if err != nil || p.Entries[0].After != (store.Location{AssetTag: "A-9999"}) {
		t.Errorf("asset tag only: %+v, %v", p, err)
	}
	p, err = plan(t, db, "id,rack\n"+id(5)+",R13\n")
	if err != nil || p.Entries[0].After != (store.Location{Building: "DC1", Room: "Hall A", Rack: "R13", Height: 2, AssetTag: "A-0005"}) {
		t.Errorf("moved rack: %+v, %v", p.Entries, err)
	}
	p, err = plan(t, db, "id,rack,unit\n"+id(5)+",,\n")
	if err != nil || p.Entries[0].After != (store.Location{Building: "DC1", Room: "Hall A", Height: 2, AssetTag: "A-0005"}) {
		t.Errorf("taken out of its rack: %+v, %v", p.Entries, err)
	}
}

// Every kind of bad row, each reported with its line; a file with any bad
// row plans nothing.
func TestBadRows(t *testing.T) {
	db := site(t)
	h := "id,serial,mac,node_name,building,room,rack,unit,height,asset_tag\n"
	row := func(key, building, room, rack, unit, height string) string {
		return key + "," + building + "," + room + "," + rack + "," + unit + "," + height + ",\n"
	}
	byID := func(i int) string { return id(i) + ",,," }
	for name, c := range map[string]struct {
		file string
		want []RowError
	}{
		"empty file":         {"", []RowError{{1, "the file is empty: it needs a header"}}},
		"unknown column":     {"id,rack,model\n", []RowError{{1, `column "model" is not one of id, serial, mac, node_name, building, room, rack, unit, height, asset_tag`}}},
		"column twice":       {"id,rack,Rack\n", []RowError{{1, "column rack is named twice"}}},
		"no key column":      {"building,rack\nDC1,R1\n", []RowError{{1, "the header names no id, serial, mac or node_name column"}}},
		"no location column": {"id,serial\n", []RowError{{1, "the header names no building, room, rack, unit, height or asset_tag column"}}},
		"field count":        {"id,rack\n" + id(0) + ",R1,extra\n" + id(1) + ",R1\n" + id(2) + "\n", []RowError{{2, "3 fields, the header has 2"}, {4, "1 fields, the header has 2"}}},
		"bare quote":         {"id,rack\n" + id(0) + ",R\"1\n" + id(1) + ",R1\n", []RowError{{2, `bare " in non-quoted-field`}}},
		"bad id":             {h + row("m-xyz,,,", "", "", "R1", "", ""), []RowError{{2, `id "m-xyz" is not a machine ID`}}},
		"unknown id":         {h + row("m-0000000000ff,,,", "", "", "R1", "", ""), []RowError{{2, "id m-0000000000ff names no machine"}}},
		"unknown serial":     {h + row(",NOSUCH,,", "", "", "R1", "", ""), []RowError{{2, `serial "NOSUCH" names no machine`}}},
		"shared serial":      {h + row(",0123456789,,", "", "", "R1", "", ""), []RowError{{2, `serial "0123456789" names 2 machines (m-000000000009, m-00000000000a): give the id`}}},
		"bad mac":            {h + row(",,52:54:00,", "", "", "R1", "", ""), []RowError{{2, `mac "52:54:00" is not a 48-bit MAC address`}}},
		"unknown mac":        {h + row(",,52:54:00:ff:ff:ff,", "", "", "R1", "", ""), []RowError{{2, `mac "52:54:00:ff:ff:ff" names no machine`}}},
		"unknown name":       {h + row(",,,web-01", "", "", "R1", "", ""), []RowError{{2, `node_name "web-01" names no machine`}}},
		"keys disagree":      {h + row(id(0)+","+serialOf(1)+",,", "", "", "R1", "", ""), []RowError{{2, "id says m-000000000001, serial says m-000000000002"}}},
		"no key":             {h + row(",,,", "DC1", "", "", "", ""), []RowError{{2, "no id, serial, mac or node_name to match a machine by"}}},
		"twice":              {h + row(byID(0), "", "", "R1", "1", "") + row(",,"+macOf(0)+",", "", "", "R1", "2", ""), []RowError{{3, "m-000000000001 (by mac) is on line 2 already"}}},
		"unit not a number":  {h + row(byID(0), "", "", "R1", "twenty", ""), []RowError{{2, `unit "twenty" is not a whole number`}}},
		"height not number":  {h + row(byID(0), "", "", "R1", "1", "2.5"), []RowError{{2, `height "2.5" is not a whole number`}}},
		"unit without rack":  {h + row(byID(0), "DC1", "", "", "7", ""), []RowError{{2, "unit 7 needs a rack"}}},
		"bad rack name":      {h + row(byID(0), "", "", "R 12", "", ""), []RowError{{2, `rack name "R 12"`}}},
		"wrong building":     {h + row(byID(0), "DC2", "", "R12", "1", ""), []RowError{{2, `rack R12 stands in building "DC1", not "DC2"`}}},
		"control character":  {h + row(byID(0), "DC\x011", "", "", "", ""), []RowError{{2, "building \"DC\\x011\" holds a control character"}}},
		"long field":         {h + row(byID(0), strings.Repeat("b", MaxField+1), "", "", "", ""), []RowError{{2, "field 5 is not UTF-8 text of at most 256 bytes"}}},
		"share a unit":       {h + row(byID(0), "", "", "R7", "3", "2") + row(byID(1), "", "", "R7", "4", ""), []RowError{{3, "m-000000000001 at U3-4 and m-000000000002 at U4 in rack R7 share a unit"}}},
		"onto one in place":  {h + row(byID(0), "", "", "R12", "25", ""), []RowError{{2, "m-000000000006 at U24-25 and m-000000000001 at U25 in rack R12 share a unit"}}},
		"past the top":       {h + row(byID(0), "", "", "R12", "42", "2"), []RowError{{2, "m-000000000001 at U42-43 in rack R12 goes past its 42U"}}},
		"every bad row": {h + row(byID(0), "", "", "R1", "1", "") + row(",NOSUCH,,", "", "", "", "", "") + row(byID(2), "", "", "R1", "x", "") +
			row(byID(3), "", "", "R1", "2", "") + row(byID(4), "", "", "", "3", ""),
			[]RowError{{3, `serial "NOSUCH" names no machine`}, {4, `unit "x" is not a whole number`}, {6, "unit 3 needs a rack"}}},
	} {
		p, err := plan(t, db, c.file)
		var errs *Errors
		if p != nil || !errors.As(err, &errs) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: plan %v, %v; want every bad row", name, p, err)
			continue
		}
		if len(errs.Rows) != len(c.want) {
			t.Errorf("%s: %v\nwant %v", name, errs.Rows, c.want)
			continue
		}
		for i, w := range c.want {
			if got := errs.Rows[i]; got.Line != w.Line || !strings.Contains(got.Msg, w.Msg) {
				t.Errorf("%s: %v, want line %d: …%s…", name, got, w.Line, w.Msg)
			}
		}
		if !strings.HasPrefix(store.Public(err), fmt.Sprintf("%d bad ", len(c.want))) || !strings.Contains(store.Public(err), "nothing imported:\nline ") {
			t.Errorf("%s: the operator reads %q", name, store.Public(err))
		}
	}
}

// macTwice is a store in which one MAC names two machines: the store
// refuses that (PutMachine), so only a store damaged or restored from
// elsewhere could; the import must still refuse to guess.
type macTwice struct {
	*store.Tx
	mac string
}

func (s macTwice) MachineIDsByMAC(mac string) []string {
	if mac == s.mac {
		return []string{id(0), id(1)}
	}
	return s.Tx.MachineIDsByMAC(mac)
}

func TestAmbiguousMAC(t *testing.T) {
	db := site(t)
	mac := fleet.Generate(1, 0).BootMAC
	db.View(func(tx *store.Tx) error {
		_, err := Parse(strings.NewReader("mac,rack\n"+mac+",R1\n"), macTwice{tx, mac})
		var errs *Errors
		if !errors.As(err, &errs) || len(errs.Rows) != 1 || !strings.Contains(errs.Rows[0].Msg, "names 2 machines (m-000000000001, m-000000000002): give the id") {
			t.Errorf("%v", err)
		}
		return nil
	})
}

func TestBounds(t *testing.T) {
	db := site(t)
	var b strings.Builder
	b.WriteString("id,rack\n")
	for range MaxErrors + 50 {
		b.WriteString("m-0000000000ff,R1\n")
	}
	_, err := plan(t, db, b.String())
	var errs *Errors
	if !errors.As(err, &errs) || len(errs.Rows) != MaxErrors || errs.More != 50 || !strings.HasSuffix(errs.Error(), "and 50 more bad rows") {
		t.Errorf("many bad rows: %d reported, %d more", len(errs.Rows), errs.More)
	}
	if !strings.HasPrefix(store.Public(err), "150 bad rows") {
		t.Errorf("public: %.40q", store.Public(err))
	}
	big := "id,rack\n" + strings.Repeat("x", MaxBytes)
	if _, err := plan(t, db, big); !errors.Is(err, store.ErrInvalid) || !strings.Contains(store.Public(err), "larger than the 8 MiB") {
		t.Errorf("a large file: %v", err)
	}
}

// FuzzParse: whatever the file, Parse returns a plan or every bad row
// with a line in the file, never both, and never panics. The seed corpus
// is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte("id,rack,unit\n" + id(0) + ",R12,1\n"))
	f.Add([]byte("serial,building,room,rack,unit,height,asset_tag\n" + serialOf(1) + ",DC1,Hall A,R12,30,2,A-1\n"))
	db := site(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan(t, db, string(data))
		lines := strings.Count(string(data), "\n") + 1
		switch {
		case (p == nil) == (err == nil):
			t.Fatalf("plan %v and error %v", p, err)
		case err != nil:
			var errs *Errors
			if !errors.As(err, &errs) {
				if !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("an error of another kind: %v", err)
				}
				return
			}
			for _, r := range errs.Rows {
				if r.Line < 1 || r.Line > lines {
					t.Fatalf("line %d of a %d-line file: %v", r.Line, lines, r)
				}
			}
		default:
			for _, e := range p.Entries {
				if err := store.CheckLocation(e.After); err != nil {
					t.Fatalf("planned an invalid location: %+v: %v", e, err)
				}
			}
		}
	})
}
