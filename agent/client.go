package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollcall/rollcall/agent/nodeenv"
)

// Errors a caller can tell apart: both are final, retrying cannot fix them.
var (
	// ErrCAMismatch: /ca.pem holds no certificate rollcall.ca= names.
	ErrCAMismatch = nodeenv.ErrCAMismatch
	// ErrTLS: the HTTPS peer failed verification against the pinned CA.
	ErrTLS = errors.New("tls verification failed")
)

// APIError is a 4xx answer from the appliance: final, not retried.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("appliance answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Client talks to the appliance: plain HTTP to rollcall.server, or HTTPS
// to rollcall.tls with the cluster CA, pinned by rollcall.ca, as the only
// root. Once TLS was asked for, nothing goes over plain HTTP but the CA
// fetch itself.
type Client struct {
	base     string
	token    string
	job      string
	hc       *http.Client
	retryFor time.Duration
	log      *slog.Logger
}

// Connect builds the client. With TLS it first fetches /ca.pem over HTTP
// (retrying while the appliance is unreachable) and accepts it only by its
// SHA-256 fingerprint.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	c := &Client{base: strings.TrimRight(cfg.Server, "/"), token: cfg.Token, job: cfg.Job, retryFor: cfg.RetryFor, log: cfg.logger()}
	if c.retryFor <= 0 {
		c.retryFor = DefaultRetryFor
	}
	plain := &http.Client{Timeout: 30 * time.Second}
	if cfg.TLS == "" {
		c.hc = plain
		return c, nil
	}
	if cfg.CA == "" {
		return nil, fmt.Errorf("rollcall.tls=%s without rollcall.ca=: nothing to check the server by", cfg.TLS)
	}
	var pemBytes []byte
	err := c.retry(ctx, "GET /ca.pem", func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/ca.pem", nil)
		if err != nil {
			return false, err
		}
		res, err := plain.Do(req)
		if err != nil {
			return true, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		if err != nil {
			return true, err
		}
		if res.StatusCode != http.StatusOK {
			return res.StatusCode >= 500, fmt.Errorf("GET /ca.pem: %s", res.Status)
		}
		pemBytes = b
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	ca, err := PinnedCA(pemBytes, cfg.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c.base = strings.TrimRight(cfg.TLS, "/")
	c.hc = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 15 * time.Second,
		// No proxy: the image has no environment, and a proxy would be a
		// second party in the pinned path.
		Proxy: nil,
	}}
	return c, nil
}

// PinnedCA is the certificate of the CA bundle pemBytes whose SHA-256
// equals fingerprint (nodeenv.PinnedCA).
func PinnedCA(pemBytes []byte, fingerprint string) (*x509.Certificate, error) {
	return nodeenv.PinnedCA(pemBytes, fingerprint)
}

// BaseURL is where API requests go (the HTTPS URL once TLS is set up).
func (c *Client) BaseURL() string { return c.base }

// Do sends a JSON request and decodes a JSON answer into out (when not
// nil), retrying with backoff while the appliance is unreachable or answers
// 5xx/429. A 4xx is final (*APIError); so is a TLS verification failure
// (ErrTLS): the agent never falls back to plain HTTP.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	return c.retry(ctx, method+" "+path, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		c.auth(req)
		res, err := c.hc.Do(req)
		if err != nil {
			if isTLSError(err) {
				return false, fmt.Errorf("%w: %v", ErrTLS, err)
			}
			return true, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
		if err != nil {
			return true, err
		}
		if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
			return true, fmt.Errorf("%s %s: %s", method, path, res.Status)
		}
		if res.StatusCode >= 400 {
			ae := &APIError{Status: res.StatusCode}
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if json.Unmarshal(b, &e) == nil {
				ae.Code, ae.Message = e.Error.Code, e.Error.Message
			}
			return false, ae
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return false, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
			}
		}
		return false, nil
	})
}

// auth sets the agent's credentials: its token, and in deploy mode the
// job's token.
func (c *Client) auth(req *http.Request) {
	if c.token != "" {
		req.Header.Set("X-Rollcall-Token", c.token)
	}
	if c.job != "" {
		req.Header.Set("X-Rollcall-Job", c.job)
	}
}

// Open GETs a file to stream it: target is a path on the appliance
// ("/os/blobs/…") or an absolute URL. It retries like Do until the answer
// starts; the body, once it flows, is the caller's, with no overall
// timeout (an image takes as long as it takes) but a stall of a minute
// without bytes ends it. The job's token goes only to the appliance itself.
func (c *Client) Open(ctx context.Context, target string) (io.ReadCloser, error) {
	u := target
	own := strings.HasPrefix(target, "/")
	if own {
		u = c.base + target
	}
	hc := &http.Client{Transport: c.hc.Transport}
	var body io.ReadCloser
	err := c.retry(ctx, "GET "+target, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false, err
		}
		if own || strings.HasPrefix(u, c.base+"/") {
			c.auth(req)
		}
		res, err := hc.Do(req)
		if err != nil {
			if isTLSError(err) {
				return false, fmt.Errorf("%w: %v", ErrTLS, err)
			}
			return true, err
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
				return true, fmt.Errorf("GET %s: %s", target, res.Status)
			}
			return false, &APIError{Status: res.StatusCode, Message: "GET " + target + ": " + res.Status}
		}
		body = newStallReader(res.Body, time.Minute)
		return false, nil
	})
	return body, err
}

// stallReader fails a read that waits longer than limit for its first
// byte: a server that stops sending must not hang a deploy for ever. One
// watchdog goroutine per body checks the read in progress a few times per
// limit (no timer per read: a deploy makes hundreds of thousands of reads).
type stallReader struct {
	rc      io.ReadCloser
	limit   time.Duration
	since   atomic.Int64 // unix nanoseconds the read in progress began, 0 if none
	stalled atomic.Bool
	once    sync.Once
	stop    chan struct{}
}

func newStallReader(rc io.ReadCloser, limit time.Duration) *stallReader {
	s := &stallReader{rc: rc, limit: limit, stop: make(chan struct{})}
	go s.watch()
	return s
}

func (s *stallReader) watch() {
	tick := time.NewTicker(max(s.limit/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			if t := s.since.Load(); t != 0 && now.UnixNano()-t > int64(s.limit) {
				s.stalled.Store(true)
				s.rc.Close()
				return
			}
		}
	}
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.since.Store(time.Now().UnixNano())
	n, err := s.rc.Read(p)
	s.since.Store(0)
	if err != nil && s.stalled.Load() {
		err = fmt.Errorf("no data for %s: %w", s.limit, err)
	}
	return n, err
}

func (s *stallReader) Close() error {
	s.once.Do(func() { close(s.stop) })
	return s.rc.Close()
}

func isTLSError(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &rh)
}

// retry runs try until it succeeds, fails for good, or c.retryFor has
// passed; waits grow from 1 s to 30 s with jitter.
func (c *Client) retry(ctx context.Context, what string, try func() (again bool, err error)) error {
	deadline := time.Now().Add(c.retryFor)
	wait := time.Second
	for attempt := 1; ; attempt++ {
		again, err := try()
		if err == nil || !again {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s: appliance unreachable for %s: %w", what, c.retryFor, err)
		}
		c.log.Warn("appliance not reachable; retrying", "request", what, "attempt", attempt, "in", wait, "err", err)
		t := time.NewTimer(wait + time.Duration(rand.Int64N(int64(wait/4)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 30*time.Second)
	}
}
