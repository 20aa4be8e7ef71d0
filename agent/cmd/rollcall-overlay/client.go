package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/rollcall/rollcall/agent/nodeenv"
)

// Bounds of one apply.
const (
	MaxOverlay   = 16 << 20         // bytes of tar
	ApplyTimeout = 60 * time.Second // fetch, retries and writes
	// DefaultRefresh is the watch interval when neither the kernel command
	// line nor the appliance says.
	DefaultRefresh = 300
)

// ErrUnauthorized: the appliance refused the node token.
var ErrUnauthorized = errors.New("the appliance refused this node's token (401): the machine was unassigned or assigned again since it booted; boot it again for a new token")

// errPin: the CA the appliance offers is not the pinned one; final.
var errPin = errors.New("CA pin")

// Client fetches this node's overlays.
type Client struct {
	Config nodeenv.Config
	HTTP   *http.Client // default: built from Config (TLS pinned to the CA when rollcall.tls= is set)
	base   string
	// Backoff is the first wait between tries (default 1 s).
	Backoff time.Duration
	// Timeout bounds one apply (default ApplyTimeout).
	Timeout time.Duration
}

// Result is what an apply wrote.
type Result struct {
	Files int
	Bytes int64
	Took  time.Duration
}

// Apply fetches the tree ("system" or "runtime") and writes it under root,
// within ApplyTimeout.
func (c *Client) Apply(ctx context.Context, tree, root string) (*Result, error) {
	start := time.Now()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = ApplyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var files []File
	err := c.retry(ctx, func() (bool, error) {
		body, retry, err := c.get(ctx, "/api/v1/stateless/self/overlay/"+tree, MaxOverlay)
		if err != nil {
			return retry, err
		}
		files, err = ReadTar(body)
		return false, err
	})
	if err != nil {
		return nil, err
	}
	n, err := WriteFiles(root, files)
	if err != nil {
		return nil, err
	}
	if tree == "system" && root == "/" {
		setHostname(files)
	}
	return &Result{Files: len(files), Bytes: n, Took: time.Since(start)}, nil
}

// Self is GET /api/v1/stateless/self.
type Self struct {
	Machine        string   `json:"machine"`
	Name           string   `json:"name"`
	Profile        string   `json:"profile"`
	Addresses      []string `json:"addresses"`
	RefreshSeconds int      `json:"refresh_seconds"`
}

// Refresh is how often watch applies the runtime tree: rollcall.refresh=,
// else what the appliance says, else DefaultRefresh.
func (c *Client) Refresh(ctx context.Context) time.Duration {
	if c.Config.Refresh > 0 {
		return time.Duration(c.Config.Refresh) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var s Self
	body, _, err := c.get(ctx, "/api/v1/stateless/self", 64<<10)
	if err == nil && json.Unmarshal(body, &s) == nil && s.RefreshSeconds > 0 && s.RefreshSeconds <= nodeenv.MaxRefresh {
		return time.Duration(s.RefreshSeconds) * time.Second
	}
	return DefaultRefresh * time.Second
}

// Watch applies the runtime tree every Refresh until ctx ends, reporting
// each result; a failed apply is reported and tried again at the next tick.
func (c *Client) Watch(ctx context.Context, root string, report func(*Result, error)) error {
	every := c.Refresh(ctx)
	for {
		res, err := c.Apply(ctx, "runtime", root)
		if errors.Is(err, ErrUnauthorized) {
			return err // no later try can succeed with this token
		}
		report(res, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// retry runs try until it succeeds, says not to retry, or ctx ends; waits
// double from Backoff up to 8 s.
func (c *Client) retry(ctx context.Context, try func() (retry bool, err error)) error {
	wait := c.Backoff
	if wait <= 0 {
		wait = time.Second
	}
	for {
		retry, err := try()
		if err == nil || !retry {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(wait*2, 8*time.Second)
	}
}

// get GETs path with the node token and returns at most limit bytes of
// a 200 answer. retry says whether trying again may help.
func (c *Client) get(ctx context.Context, path string, limit int64) ([]byte, bool, error) {
	if err := c.connect(ctx); err != nil {
		return nil, !errors.Is(err, errPin), err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("X-Rollcall-Node", c.Config.Node)
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, true, fmt.Errorf("GET %s: %w", path, err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		return nil, false, ErrUnauthorized
	case res.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		retry := res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusRequestTimeout
		return nil, retry, fmt.Errorf("GET %s: %s: %s", path, res.Status, strings.TrimSpace(string(msg)))
	case res.ContentLength > limit:
		return nil, false, fmt.Errorf("GET %s: %d bytes, more than the %d allowed", path, res.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, true, fmt.Errorf("GET %s: %w", path, err)
	}
	if int64(len(body)) > limit {
		return nil, false, fmt.Errorf("GET %s: more than the %d bytes allowed", path, limit)
	}
	return body, false, nil
}

// connect picks the base URL and the HTTP client once: plain HTTP to
// rollcall.server, or HTTPS to rollcall.tls with the cluster CA fetched
// from rollcall.server's /ca.pem and accepted only by its fingerprint.
func (c *Client) connect(ctx context.Context) error {
	if c.base != "" {
		return nil
	}
	cfg := c.Config
	if cfg.TLS == "" {
		if c.HTTP == nil {
			c.HTTP = &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 30 * time.Second}}
		}
		c.base = strings.TrimRight(cfg.Server, "/")
		return nil
	}
	plain := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Server, "/")+"/ca.pem", nil)
	if err != nil {
		return err
	}
	res, err := plain.Do(req)
	if err != nil {
		return fmt.Errorf("GET /ca.pem: %w", err)
	}
	defer res.Body.Close()
	pemBytes, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil || res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /ca.pem: %s %v", res.Status, err)
	}
	ca, err := pinnedCA(pemBytes, cfg.CA)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: &http.Transport{Proxy: nil, ResponseHeaderTimeout: 30 * time.Second,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	c.base = strings.TrimRight(cfg.TLS, "/")
	return nil
}

// pinnedCA returns the PEM's first certificate if the SHA-256 of its DER
// is fingerprint (the agent's rule, agent.PinnedCA, kept here so that this
// binary does not link the agent).
func pinnedCA(pemBytes []byte, fingerprint string) (*x509.Certificate, error) {
	ca, err := nodeenv.PinnedCA(pemBytes, fingerprint)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errPin, err)
	}
	return ca, nil
}
