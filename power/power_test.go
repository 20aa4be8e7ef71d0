package power_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/power"
)

func TestParse(t *testing.T) {
	if _, err := power.ParseAction("restart"); !errors.Is(err, power.ErrInvalid) || !strings.Contains(err.Error(), "on, off, soft, cycle, reset") {
		t.Errorf("ParseAction = %v", err)
	}
	if _, err := power.ParseDevice("usb"); !errors.Is(err, power.ErrInvalid) || !strings.Contains(err.Error(), "pxe, disk, cdrom, bios, none") {
		t.Errorf("ParseDevice = %v", err)
	}
	if a, err := power.ParseAction("cycle"); err != nil || a != power.ActionCycle {
		t.Errorf("ParseAction(cycle) = %v, %v", a, err)
	}
}

func TestFingerprints(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for in, ok := range map[string]bool{
		hex: true, strings.ToUpper(hex): true, "sha256:" + hex: true,
		strings.TrimSuffix(strings.Repeat("AB:", 32), ":"): true,
		"abcd": false, strings.Repeat("zz", 32): false,
	} {
		got, err := power.NormalizeFingerprint(in)
		if ok != (err == nil) || (ok && got != hex) {
			t.Errorf("NormalizeFingerprint(%q) = %q, %v", in, got, err)
		}
	}
}

func TestFetchCertificateSendsNothing(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := power.FetchCertificate(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := power.CertSHA256(srv.Certificate()); got != want {
		t.Fatalf("fingerprint %s, want %s", got, want)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d HTTP requests sent while reading the certificate", n)
	}
}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.5.21":             "https://10.0.5.21:443",
		"bmc1.example:8443":     "https://bmc1.example:8443",
		"https://[fd00::5]/x":   "https://[fd00::5]:443",
		"http://127.0.0.1:8000": "http://127.0.0.1:8000",
	} {
		u, err := power.BaseURL(in, "https", "443")
		if err != nil || u.String() != want {
			t.Errorf("BaseURL(%q) = %v, %v; want %s", in, u, err, want)
		}
	}
	if _, err := power.BaseURL("ftp://x", "https", "443"); !errors.Is(err, power.ErrInvalid) {
		t.Errorf("ftp accepted: %v", err)
	}
}
