package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rollcall/rollcall/store/inventory"
)

func TestParseCmdline(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	cases := map[string]struct {
		line string
		want Config
		err  string
	}{
		"as boot.ipxe renders it": {
			line: "initrd=initrd rollcall.server=http://10.0.0.1:8080 rollcall.token=tok rollcall.tls=https://10.0.0.1:8443 rollcall.ca=" + fp + " console=ttyS0",
			want: Config{Server: "http://10.0.0.1:8080", Token: "tok", TLS: "https://10.0.0.1:8443", CA: fp},
		},
		"commissioned machine powers off": {line: "initrd=initrd rollcall.server=http://h rollcall.poweroff", want: Config{Server: "http://h", PowerOff: true}},
		"poweroff needs nothing else":     {line: "rollcall.poweroff", want: Config{PowerOff: true}},
		"options": {
			line: `rollcall.server=http://h:80 rollcall.bmcuser="rollcall admin" rollcall.nopoweroff rollcall.nobmc BOOTIF=01-52-54-00-12-34-56 rollcall.lldpwait=5s`,
			want: Config{Server: "http://h:80", BMCUser: "rollcall admin", NoPowerOff: true, NoBMC: true, BootMAC: "52:54:00:12:34:56", LLDPWait: 5 * time.Second},
		},
		"deploy mode": {line: "rollcall.server=http://h rollcall.mode=deploy rollcall.job=jt-1",
			want: Config{Server: "http://h", Mode: ModeDeploy, Job: "jt-1"}},
		"deploy without a job": {line: "rollcall.server=http://h rollcall.mode=deploy", err: "rollcall.job"},
		"an unknown mode":      {line: "rollcall.server=http://h rollcall.mode=install", err: "rollcall.mode"},
		"no server":            {line: "quiet", err: "rollcall.server"},
		"server not a url":     {line: "rollcall.server=10.0.0.1", err: "rollcall.server"},
		"tls without ca":       {line: "rollcall.server=http://h rollcall.tls=https://h", err: "rollcall.ca"},
		"tls not https":        {line: "rollcall.server=http://h rollcall.tls=http://h rollcall.ca=" + fp, err: "https://"},
		"bad lldp duration":    {line: "rollcall.server=http://h rollcall.lldpwait=soon", err: "lldpwait"},
		"bad boot mac":         {line: "rollcall.server=http://h rollcall.bootmac=xyz", err: "boot MAC"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCmdline(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.BMCUser == "" {
				tc.want.BMCUser = "commissioner"
			}
			if tc.want.LLDPWait == 0 {
				tc.want.LLDPWait = DefaultLLDPWait
			}
			tc.want.Root, tc.want.Live = "/", true
			if d := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Config{}, "Log")); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// pki is an HTTPS API server and the plain HTTP server that hands out
// ca.pem, as an appliance node has.
type pki struct {
	tls, plain *httptest.Server
	caPEM      []byte
	fp         string
	tlsHits    atomic.Int32 // API requests the HTTPS server answered
	plainHits  atomic.Int32 // API requests that reached plain HTTP
}

func newPKI(t *testing.T) *pki {
	p := &pki{}
	api := func(hits *atomic.Int32) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"m-000000000001","state":"new","index":7}`))
		}
	}
	p.tls = httptest.NewTLSServer(api(&p.tlsHits))
	t.Cleanup(p.tls.Close)
	// httptest's certificate is self-signed: it is its own CA.
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.tls.Certificate().Raw})
	sum := sha256.Sum256(p.tls.Certificate().Raw)
	p.fp = hex.EncodeToString(sum[:])
	mux := http.NewServeMux()
	mux.HandleFunc("/ca.pem", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(p.caPEM) })
	mux.HandleFunc("/", api(&p.plainHits))
	p.plain = httptest.NewServer(mux)
	t.Cleanup(p.plain.Close)
	return p
}

func (p *pki) config() Config {
	return Config{Server: p.plain.URL, TLS: p.tls.URL, CA: p.fp, Token: "tok", RetryFor: 3 * time.Second}
}

func TestHTTPSPinned(t *testing.T) {
	p := newPKI(t)
	c, err := Connect(context.Background(), p.config())
	if err != nil {
		t.Fatal(err)
	}
	var rep EnlistReply
	if err := c.Do(context.Background(), http.MethodPost, "/api/v1/enlist", map[string]string{}, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ID != "m-000000000001" || p.tlsHits.Load() != 1 || p.plainHits.Load() != 0 {
		t.Errorf("reply %+v; https requests %d, plain %d", rep, p.tlsHits.Load(), p.plainHits.Load())
	}
}

func TestHTTPSFingerprintMismatch(t *testing.T) {
	p := newPKI(t)
	cfg := p.config()
	cfg.CA = strings.Repeat("0", 64)
	_, err := Connect(context.Background(), cfg)
	if !errors.Is(err, ErrCAMismatch) {
		t.Fatalf("err = %v, want ErrCAMismatch", err)
	}
	if p.tlsHits.Load() != 0 || p.plainHits.Load() != 0 {
		t.Errorf("requests after a refused CA: https %d, plain %d", p.tlsHits.Load(), p.plainHits.Load())
	}
}

// The pinned CA is right but the HTTPS peer shows another certificate (a
// man in the middle, a node with a foreign certificate): the request fails
// at once and nothing falls back to plain HTTP.
func TestHTTPSNoFallback(t *testing.T) {
	p := newPKI(t)
	// The real cluster CA, which the HTTPS server's certificate is not from.
	ca := selfSigned(t)
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	sum := sha256.Sum256(ca.Raw)
	cfg := p.config()
	cfg.CA = hex.EncodeToString(sum[:])
	c, err := Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Do(context.Background(), http.MethodPost, "/api/v1/commission", map[string]string{}, nil)
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("err = %v, want ErrTLS", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("a verification failure was retried (%v)", time.Since(start))
	}
	if p.plainHits.Load() != 0 || p.tlsHits.Load() != 0 {
		t.Errorf("requests answered: plain %d, https %d", p.plainHits.Load(), p.tlsHits.Load())
	}

	// The HTTPS port gone: retried until the budget runs out, still never
	// over plain HTTP.
	p2 := newPKI(t)
	c2, err := Connect(context.Background(), p2.config())
	if err != nil {
		t.Fatal(err)
	}
	p2.tls.Close()
	c2.retryFor = 1500 * time.Millisecond
	if err := c2.Do(context.Background(), http.MethodGet, "/api/v1/health", nil, nil); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("err = %v, want unreachable", err)
	}
	if p2.plainHits.Load() != 0 {
		t.Errorf("%d requests fell back to plain HTTP", p2.plainHits.Load())
	}
}

func selfSigned(t *testing.T) *x509.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollcall test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestRetryThenFinal(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := calls.Add(1); {
		case r.URL.Path == "/bad":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"wrong agent token"}}`))
		case n <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(`{"id":"m-1"}`))
		}
	}))
	defer srv.Close()
	c, err := Connect(context.Background(), Config{Server: srv.URL, RetryFor: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var rep EnlistReply
	if err := c.Do(context.Background(), http.MethodGet, "/ok", nil, &rep); err != nil || rep.ID != "m-1" || calls.Load() != 3 {
		t.Fatalf("err %v, reply %+v after %d calls", err, rep, calls.Load())
	}
	calls.Store(10)
	err = c.Do(context.Background(), http.MethodGet, "/bad", nil, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Message != "wrong agent token" || calls.Load() != 11 {
		t.Errorf("err %v after %d calls", err, calls.Load()-10)
	}
}

// Run against a stand-in for the appliance's agent API (the real appliance
// runs in e2e_test.go): the requests carry the token, the enlist identity
// and the full report.
func TestRunAgainstAPI(t *testing.T) {
	var enlist map[string]any
	var report inventory.Report
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Rollcall-Token") != "tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/api/v1/enlist":
			_ = json.NewDecoder(r.Body).Decode(&enlist)
			_, _ = w.Write([]byte(`{"id":"m-00000000000a","state":"commissioning","index":3}`))
		case "/api/v1/bmc-hint":
			if r.URL.Query().Get("macs") != "52:54:00:12:34:56,52:54:00:12:34:57" {
				t.Errorf("bmc-hint macs %q", r.URL.Query().Get("macs"))
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no bmc_hints entry for these MACs"}}`))
		case "/api/v1/commission":
			_ = json.NewDecoder(r.Body).Decode(&report)
			_, _ = w.Write([]byte(`{"id":"m-00000000000a","state":"ready","index":4}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	res, err := Run(context.Background(), Config{Server: srv.URL, Token: "tok", Root: filepath.Join("testdata", "vm"), NoPowerOff: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commission.State != "ready" || res.Enlist.ID != "m-00000000000a" {
		t.Errorf("result %+v", res)
	}
	wantEnlist := map[string]any{"system_uuid": "8f0c7a2e-3b1d-4e5f-9a6b-1c2d3e4f5a6b", "serial": "RC-VM-0001", "boot_mac": "",
		"macs": []any{"52:54:00:12:34:56", "52:54:00:12:34:57"}}
	if d := cmp.Diff(wantEnlist, enlist); d != "" {
		t.Errorf("enlist (-want +got):\n%s", d)
	}
	if report.Version != 1 || report.Agent != Version || len(report.Disks) != 2 || len(report.NICs) != 2 || report.BMC != nil || len(report.Errors) != 0 {
		t.Errorf("report: version %d agent %q, %d disks, %d NICs, bmc %+v, errors %v", report.Version, report.Agent, len(report.Disks), len(report.NICs), report.BMC, report.Errors)
	}
	if err := inventory.Validate(&report); err != nil {
		t.Error(err)
	}
}
