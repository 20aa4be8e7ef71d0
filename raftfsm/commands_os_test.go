package raftfsm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/fsmtest"
	"github.com/rollcall/rollcall/store"
)

func osVersion(v string, imported time.Time) raftfsm.OSVersion {
	return raftfsm.OSVersion{
		Version: v, File: raftfsm.ImageFile{Name: raftfsm.OSFileName, Size: 1000, SHA256: fmt.Sprintf("%064x", "z"+v)},
		RawSize: 4096, RawSHA256: fmt.Sprintf("%064x", "r"+v), SectorSize: 512, Format: "qcow2", Imported: imported,
	}
}

func addOS(name, track, v string, at time.Time) *raftfsm.OSVersionAdd {
	return &raftfsm.OSVersionAdd{Name: name, Family: store.FamilyDebian, Track: track, New: osVersion(v, at), Node: "n1", Now: at}
}

func osRecord(t *testing.T, l *fsmtest.Log, name string) store.OSImage {
	t.Helper()
	var o store.OSImage
	if err := l.DB.View(func(tx *store.Tx) error {
		var err error
		o, err = tx.OSImage(name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return o
}

func versionsOf(o store.OSImage) string {
	var vs []string
	for _, v := range o.Versions {
		vs = append(vs, v.Version)
	}
	return strings.Join(vs, ",")
}

func wantRefused(t *testing.T, err, kind error, says string) {
	t.Helper()
	if !errors.Is(err, kind) || !strings.Contains(store.Public(err), says) {
		t.Errorf("got %v (public %q), want %v saying %q", err, store.Public(err), kind, says)
	}
}

// TestOSCatalogCommands: a version added to a latest name becomes
// current, to a pinned one only when it has none; promote moves current;
// a node joins the holders only for the file it verified; remove refuses
// current while another exists and a version a job uses.
func TestOSCatalogCommands(t *testing.T) {
	l := fsmtest.Open(t)
	l.Must(t, addOS("debian-13", "", "v1", t0), addOS("debian-13", "", "v2", t0.Add(time.Hour)))
	if o := osRecord(t, l, "debian-13"); o.Current != "v2" || versionsOf(o) != "v1,v2" || o.Family != "debian" || o.Versions[0].Nodes[0] != "n1" {
		t.Errorf("latest: %+v, want current v2 of v1,v2 held by n1", o)
	}
	l.Must(t, addOS("rocky-9", store.TrackPinned, "p1", t0), addOS("rocky-9", "", "p2", t0.Add(time.Hour)))
	if o := osRecord(t, l, "rocky-9"); o.Current != "p1" || o.Track != store.TrackPinned {
		t.Errorf("pinned: %+v, want current p1 (the first), track pinned", o)
	}
	l.Must(t, &raftfsm.OSPromote{Name: "rocky-9", OSVersion: "p2", Now: t0})
	if o := osRecord(t, l, "rocky-9"); o.Current != "p2" {
		t.Errorf("after promote: current %s, want p2", o.Current)
	}
	wantRefused(t, l.Apply(&raftfsm.OSPromote{Name: "rocky-9", OSVersion: "p9", Now: t0}), store.ErrNotFound, `no version "p9"`)
	wantRefused(t, l.Apply(addOS("debian-13", "", "v2", t0)), store.ErrConflict, "already has version v2")

	l.Must(t, &raftfsm.OSHave{Name: "debian-13", OSVersion: "v1", Node: "n2", SHA256: fmt.Sprintf("%064x", "zv1"), Now: t0})
	wantRefused(t, l.Apply(&raftfsm.OSHave{Name: "debian-13", OSVersion: "v1", Node: "n3", SHA256: fmt.Sprintf("%064x", "other"), Now: t0}), store.ErrConflict, "not the file n3 verified")
	if o := osRecord(t, l, "debian-13"); strings.Join(o.Versions[0].Nodes, ",") != "n1,n2" {
		t.Errorf("holders %v, want n1,n2", o.Versions[0].Nodes)
	}

	wantRefused(t, l.Apply(&raftfsm.OSVersionRemove{Name: "debian-13", OSVersion: "v2", Now: t0}), store.ErrConflict, "is current: promote another version first")
	putJob(t, l, "j-0000000000000001", "debian-13", "v1", store.JobRunning)
	wantRefused(t, l.Apply(&raftfsm.OSVersionRemove{Name: "debian-13", OSVersion: "v1", Now: t0}), store.ErrConflict, "in use by job j-0000000000000001")
	wantRefused(t, l.Apply(&raftfsm.OSImageDelete{Name: "debian-13"}), store.ErrConflict, "in use by job j-0000000000000001")
	putJob(t, l, "j-0000000000000001", "debian-13", "v1", store.JobDone)
	l.Must(t, &raftfsm.OSVersionRemove{Name: "debian-13", OSVersion: "v1", Now: t0})
	l.Must(t, &raftfsm.OSVersionRemove{Name: "debian-13", OSVersion: "v2", Now: t0})
	if o := osRecord(t, l, "debian-13"); o.Current != "" || len(o.Versions) != 0 {
		t.Errorf("after removing the last version: %+v, want no current and no versions", o)
	}
	l.Must(t, &raftfsm.OSImageDelete{Name: "debian-13"})

	for name, c := range map[string]struct {
		cmd  raftfsm.Command
		kind error
		says string
	}{
		"a bad name":       {addOS("Debian 13", "", "v1", t0), store.ErrInvalid, "OS image name"},
		"a bad version":    {addOS("debian-13", "", "../v1", t0), store.ErrInvalid, "OS version"},
		"a bad family":     {&raftfsm.OSImageSet{Name: "x", Family: "suse", Now: t0}, store.ErrInvalid, `family "suse" is not one of debian, rhel`},
		"a bad track":      {&raftfsm.OSImageSet{Name: "x", Track: "nightly", Now: t0}, store.ErrInvalid, `track "nightly"`},
		"no import time":   {addOS("x", "", "v1", time.Time{}), store.ErrInvalid, "needs its import time"},
		"an unknown name":  {&raftfsm.OSPromote{Name: "nope", OSVersion: "v1", Now: t0}, store.ErrNotFound, `"nope"`},
		"a bad hash":       {&raftfsm.OSVersionAdd{Name: "x", New: func() raftfsm.OSVersion { v := osVersion("v1", t0); v.File.SHA256 = "XYZ"; return v }(), Node: "n1", Now: t0}, store.ErrInvalid, "size and a SHA-256"},
		"a bad format":     {&raftfsm.OSVersionAdd{Name: "x", New: func() raftfsm.OSVersion { v := osVersion("v1", t0); v.Format = "vmdk"; return v }(), Node: "n1", Now: t0}, store.ErrInvalid, `"vmdk" is not qcow2 or raw`},
		"a bad sector":     {&raftfsm.OSVersionAdd{Name: "x", New: func() raftfsm.OSVersion { v := osVersion("v1", t0); v.SectorSize = 520; return v }(), Node: "n1", Now: t0}, store.ErrInvalid, "sector size 520"},
		"no holder":        {&raftfsm.OSVersionAdd{Name: "x", New: osVersion("v1", t0), Now: t0}, store.ErrInvalid, "not a node name"},
		"a remove missing": {&raftfsm.OSVersionRemove{Name: "rocky-9", OSVersion: "p7", Now: t0}, store.ErrNotFound, `no version "p7"`},
	} {
		t.Run(name, func(t *testing.T) {
			wantRefused(t, l.Apply(c.cmd), c.kind, c.says)
		})
	}
	l.DB.View(func(tx *store.Tx) error {
		if all, _ := tx.OSImages(); len(all) != 1 || all[0].Name != "rocky-9" {
			t.Errorf("catalog %+v: refused commands wrote", all)
		}
		return nil
	})
}

func putJob(t *testing.T, l *fsmtest.Log, id, os, version, state string) {
	t.Helper()
	if err := l.DB.Update(func(tx *store.Tx) error {
		return tx.PutDeployJob(store.DeployJob{ID: id, Machine: "m-00000000c0de", Kind: store.JobKindDeploy, OS: os, OSVersion: version, State: state, Created: t0})
	}); err != nil {
		t.Fatal(err)
	}
}

// TestOSPrune: the state machine re-checks every version the proposer
// chose: never current, never younger than a day, never one a job uses,
// and Keep remain.
func TestOSPrune(t *testing.T) {
	l := fsmtest.Open(t)
	now := t0.Add(10 * 24 * time.Hour)
	for i, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(2 * time.Hour), now.Add(-time.Hour), now} {
		l.Must(t, addOS("debian-13", "", fmt.Sprintf("v%d", i+1), at))
	}
	prune := func(keep int, vs ...string) error {
		return l.Apply(&raftfsm.OSPrune{Name: "debian-13", Versions: vs, Keep: keep, Now: now})
	}
	wantRefused(t, prune(3, "v5"), store.ErrConflict, "v5 is current")
	wantRefused(t, prune(3, "v4"), store.ErrConflict, "v4 is younger than a day")
	wantRefused(t, prune(3, "v1", "v2", "v3"), store.ErrConflict, "fewer than 3 versions")
	wantRefused(t, prune(0, "v1"), store.ErrInvalid, "at least 1")
	wantRefused(t, prune(1, "v1", "v1"), store.ErrNotFound, "named twice")
	putJob(t, l, "j-0000000000000002", "debian-13", "v2", store.JobQueued)
	wantRefused(t, prune(3, "v1", "v2"), store.ErrConflict, "v2 is in use by job j-0000000000000002")
	if o := osRecord(t, l, "debian-13"); versionsOf(o) != "v1,v2,v3,v4,v5" {
		t.Fatalf("refused prunes removed versions: %s", versionsOf(o))
	}
	l.Must(t, &raftfsm.OSPrune{Name: "debian-13", Versions: []string{"v1", "v3"}, Keep: 3, Now: now})
	if o := osRecord(t, l, "debian-13"); versionsOf(o) != "v2,v4,v5" || o.Current != "v5" {
		t.Errorf("after prune: %s current %s, want v2,v4,v5 current v5", versionsOf(o), o.Current)
	}
}

// TestOSSyncClaim: one node holds the sync at a time; a timer start is
// refused until the interval since the last start has passed, whoever
// leads; a claim of a node that died lapses at Until.
func TestOSSyncClaim(t *testing.T) {
	l := fsmtest.Open(t)
	day := 24 * time.Hour
	start := func(node string, now time.Time, timer bool) error {
		return l.Apply(&raftfsm.OSSyncStart{Node: node, Now: now, Until: now.Add(time.Hour), Timer: timer, Interval: day})
	}
	l.Must(t, &raftfsm.OSSyncStart{Node: "n1", Now: t0, Until: t0.Add(time.Hour), Timer: true, Interval: day})
	wantRefused(t, start("n2", t0.Add(time.Minute), false), store.ErrConflict, "running on n1")
	wantRefused(t, start("n1", t0.Add(time.Minute), false), store.ErrConflict, "already running on n1")
	l.Must(t, &raftfsm.OSSyncStart{Node: "n1", Now: t0.Add(50 * time.Minute), Until: t0.Add(2 * time.Hour), Renew: true})
	wantRefused(t, start("n2", t0.Add(90*time.Minute), true), store.ErrConflict, "running on n1")
	wantRefused(t, l.Apply(&raftfsm.OSSyncEnd{Node: "n2", Started: t0, Now: t0.Add(time.Hour)}), store.ErrConflict, "does not hold")
	l.Must(t, &raftfsm.OSSyncEnd{Node: "n1", Started: t0, Now: t0.Add(100 * time.Minute), Result: []string{"debian-13: unchanged"}})
	// A new leader (n2) after the sync: the timer is not due.
	wantRefused(t, start("n2", t0.Add(3*time.Hour), true), store.ErrConflict, "not due yet")
	// An operator's sync is not the timer's: it runs.
	l.Must(t, &raftfsm.OSSyncStart{Node: "n2", Now: t0.Add(3 * time.Hour), Until: t0.Add(4 * time.Hour)})
	// n2 dies holding it; after Until, n3's timer may start (a day on).
	l.Must(t, &raftfsm.OSSyncStart{Node: "n3", Now: t0.Add(27 * time.Hour), Until: t0.Add(28 * time.Hour), Timer: true, Interval: day})
	wantRefused(t, l.Apply(&raftfsm.OSSyncStart{Node: "n2", Now: t0.Add(27 * time.Hour), Until: t0.Add(28 * time.Hour), Renew: true}), store.ErrConflict, "running on n3")
	l.DB.View(func(tx *store.Tx) error {
		s, _ := tx.OSSyncState()
		if s.Node != "n3" || !s.Started.Equal(t0.Add(27*time.Hour)) || !s.Running(t0.Add(27*time.Hour)) || strings.Join(s.Result, "") != "debian-13: unchanged" {
			t.Errorf("sync state %+v: want n3's claim, with the last result kept", s)
		}
		return nil
	})
}
