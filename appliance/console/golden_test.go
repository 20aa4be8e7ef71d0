package console

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden dumps in testdata/dump")

func TestMain(m *testing.M) {
	time.Local = time.UTC // golden dumps show times in the local zone
	os.Exit(m.Run())
}

var dumpSizes = []struct{ w, h int }{{140, 40}, {80, 24}}

// TestDumpGolden renders every page at both sizes from the fixed fleet and
// compares them with testdata/dump (go test -update rewrites them).
func TestDumpGolden(t *testing.T) {
	pages := append([]string{}, PageNames()[:len(navPages)]...)
	pages = append(pages, "machine/web-01", "machine/stor-01", "rack/R12", "rack/R13", "tag/gpu", "profile/compute")
	for _, page := range pages {
		for _, sz := range dumpSizes {
			for _, plain := range []bool{true, false} {
				if !plain && !(page == "machines" && sz.w == 80) {
					continue // one coloured dump pins the SGR output
				}
				name := fmt.Sprintf("%s-%dx%d.txt", strings.ReplaceAll(page, "/", "-"), sz.w, sz.h)
				if !plain {
					name = strings.TrimSuffix(name, ".txt") + ".ansi"
				}
				t.Run(name, func(t *testing.T) {
					var buf bytes.Buffer
					if err := Dump(&buf, sz.w, sz.h, page, plain, newFleet()); err != nil {
						t.Fatalf("Dump: %v", err)
					}
					golden(t, filepath.Join("testdata", "dump", name), buf.Bytes())
				})
			}
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the dump (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestDumpRefusesUnknownPages(t *testing.T) {
	cases := map[string]struct {
		page string
		w, h int
		want string
	}{
		"unknown page": {"hosts", 80, 24, `page "hosts": not one of overview, machines, racks, tags, cluster, events, network, images, os, profiles, doctor, access, machine/ID, rack/NAME, tag/NAME, profile/NAME`},
		"tiny screen":  {"machines", 20, 5, "dump size 20x5: at least 40x12"},
		"no id":        {"machine/", 80, 24, `page "machine/": not one of`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Dump(&bytes.Buffer{}, tc.w, tc.h, tc.page, true, newFleet())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Dump(%q, %dx%d) = %v, want %q", tc.page, tc.w, tc.h, err, tc.want)
			}
		})
	}
}

func TestDumpUnknownMachineShowsTheError(t *testing.T) {
	var buf bytes.Buffer
	err := Dump(&buf, 80, 24, "machine/nope", true, newFleet())
	if err == nil || !strings.Contains(err.Error(), `machine "nope": not found`) {
		t.Fatalf("Dump = %v, want the not-found error", err)
	}
	if !strings.Contains(buf.String(), `machine "nope": not found`) {
		t.Errorf("the screen does not show the error:\n%s", buf.String())
	}
}
