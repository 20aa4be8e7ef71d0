package deploy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/agent"
)

// jobServer is the server side of the job protocol as the contract states
// it (GET /api/v1/jobs/self, POST …/progress, the image blob), on loopback.
// The appliance's own handlers are built elsewhere; this one plays them so
// the agent's real client and pipeline run against real HTTP.
type jobServer struct {
	t     *testing.T
	token string
	job   Job
	blob  string // file served at blobPath

	truncate int64 // >0: send only this many bytes of the blob (with the full Content-Length)
	trickle  bool  // send the blob slowly, 64 KiB every 10 ms, until the agent hangs up
	// cancelWhenWriting: answer cancel=true once a write step reports bytes.
	cancelWhenWriting bool

	mu        sync.Mutex
	progress  []Progress
	cancelled bool
	badTokens int
}

const blobPath = "/os/blobs/test"

func (s *jobServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Rollcall-Job") != s.token {
		s.mu.Lock()
		s.badTokens++
		s.mu.Unlock()
		http.Error(w, `{"error":{"code":"forbidden","message":"bad job token"}}`, http.StatusForbidden)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == PathJob:
		json.NewEncoder(w).Encode(s.job)
	case r.Method == http.MethodPost && r.URL.Path == PathProgress:
		var p Progress
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.progress = append(s.progress, p)
		if s.cancelWhenWriting && p.Step == StepWrite && p.State == StateRunning && p.Bytes > 0 {
			s.cancelled = true
		}
		c := s.cancelled
		s.mu.Unlock()
		json.NewEncoder(w).Encode(ProgressReply{Cancel: c})
	case r.Method == http.MethodGet && r.URL.Path == blobPath:
		f, err := os.Open(s.blob)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		w.WriteHeader(http.StatusOK)
		var src io.Reader = f
		if s.truncate > 0 {
			src = io.LimitReader(f, s.truncate)
		}
		if !s.trickle {
			io.Copy(w, src)
			return
		}
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	default:
		http.NotFound(w, r)
	}
}

func (s *jobServer) reports() []Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Progress(nil), s.progress...)
}

func (s *jobServer) last() Progress {
	p := s.reports()
	if len(p) == 0 {
		return Progress{}
	}
	return p[len(p)-1]
}

// start serves s and returns the agent's real client for it.
func (s *jobServer) start(t *testing.T) *agent.Client {
	t.Helper()
	if s.token == "" {
		s.token = "tok-" + t.Name()
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := agent.Connect(context.Background(), agent.Config{Server: ts.URL, Job: s.token, Mode: agent.ModeDeploy, RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deployJob is a deploy job for an image file (compressed as served).
func deployJob(t *testing.T, b *builtImage, served string) Job {
	t.Helper()
	fi, err := os.Stat(served)
	if err != nil {
		t.Fatal(err)
	}
	return Job{
		ID: "j-" + t.Name(), Machine: "m-test", Kind: KindDeploy,
		Image: Image{URL: blobPath, SHA256: sha256File(t, served), Size: fi.Size(), RawSHA256: b.rawSHA, RawSize: b.rawSize,
			Format: "raw+zstd", SectorSize: 512},
		Disk: DiskRef{Serial: "QM00001"},
		Seed: Seed{MetaData: "instance-id: i-1\nlocal-hostname: node1\n", UserData: "#cloud-config\nhostname: node1\n",
			NetworkConfig: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n"},
		CAPEM:    testCA,
		EFILabel: "rollcall debian-13",
	}
}

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// testCA is a self-signed CA certificate made for the run.
var testCA = func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rollcall test CA"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<32, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}()
