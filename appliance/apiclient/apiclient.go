// Package apiclient is the one HTTP client of Rollcall's management API,
// shared by the CLI and the console: bearer auth, the cluster CA for https,
// the API's error shape turned into *Error, and retries of "no leader"
// answers (nothing was applied, so retrying through an election is safe).
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Client calls the API at Base with an admin token.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
	// NoLeaderRetry is how long "no leader" answers are retried; default 15 s.
	NoLeaderRetry time.Duration
	// Consistent makes every GET a linearizable read
	// (X-Rollcall-Consistent: 1): the answer holds every write
	// acknowledged before it, whichever node made it.
	Consistent bool
}

// New returns a client for baseURL. An https:// URL is checked against
// caFile (the cluster CA's PEM) when given, else against the system roots.
func New(baseURL, token, caFile string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api url %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("api token: empty")
	}
	c := &Client{Base: u.String(), Token: strings.TrimSpace(token), HTTP: &http.Client{}}
	if u.Scheme == "https" && caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cluster CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster CA: %s holds no PEM certificate", caFile)
		}
		c.HTTP.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// NewCert returns a client for an https baseURL that authenticates with
// an administrator's certificate (rollcall admin-cert request) instead of
// a token.
func NewCert(baseURL, caFile, certFile, keyFile string) (*Client, error) {
	if !strings.HasPrefix(baseURL, "https://") {
		return nil, fmt.Errorf("api url %q: a client certificate needs an https URL", baseURL)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	c, err := New(baseURL, "certificate", caFile)
	if err != nil {
		return nil, err
	}
	c.Token = ""
	tr, _ := c.HTTP.Transport.(*http.Transport)
	if tr == nil {
		tr = &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
		c.HTTP.Transport = tr
	}
	tr.TLSClientConfig.Certificates = []tls.Certificate{pair}
	return c, nil
}

// Error is a non-2xx answer: the status, the API's code and its message.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// NoLeader reports whether err is the API's "no leader; retry".
func NoLeader(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "no_leader"
}

// Unauthorized reports whether err is the API refusing the token.
func Unauthorized(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

// Do sends in as JSON (nil: no body) and decodes the answer into out (nil:
// discard; *json.RawMessage: keep it raw).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return err
		}
	}
	return c.send(ctx, method, path, "application/json", func() io.Reader { return bytes.NewReader(payload) }, int64(len(payload)), in != nil, true, out)
}

// Upload sends a raw body of known length (image files). A stream cannot be
// sent twice, so it is not retried.
func (c *Client) Upload(ctx context.Context, method, path string, body io.Reader, size int64, out any) error {
	return c.send(ctx, method, path, "application/octet-stream", func() io.Reader { return body }, size, true, false, out)
}

func (c *Client) send(ctx context.Context, method, path, ctype string, body func() io.Reader, size int64, hasBody, retry bool, out any) error {
	wait := c.NoLeaderRetry
	if wait == 0 {
		wait = 15 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body())
		if err != nil {
			return err
		}
		if hasBody {
			req.ContentLength = size
			req.Header.Set("Content-Type", ctype)
		}
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		if c.Consistent && method == http.MethodGet {
			req.Header.Set("X-Rollcall-Consistent", "1")
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return fmt.Errorf("cannot reach %s: %w", c.Base, err)
		}
		err = Decode(resp, out)
		resp.Body.Close()
		if !retry || !NoLeader(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Decode turns a non-2xx answer into *Error and decodes a 2xx one into out.
func Decode(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
		}
		return &Error{Status: resp.StatusCode, Message: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// Stream sends a request (a raw body of known length, a JSON value, or
// none) and hands each line of a 2xx answer to line (NDJSON: the OS
// catalog's sync and import); a non-2xx answer is an *Error, as Do's. It
// has no overall timeout (a sync takes as long as its downloads): ctx
// bounds it. A body is never retried.
func (c *Client) Stream(ctx context.Context, method, path string, in any, body io.Reader, size int64, line func([]byte) error) error {
	var rd io.Reader
	ctype := "application/octet-stream"
	switch {
	case body != nil:
		rd = body
	case in != nil:
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd, size, ctype = bytes.NewReader(b), int64(len(b)), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	if rd != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", ctype)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Consistent && method == http.MethodGet {
		req.Header.Set("X-Rollcall-Consistent", "1")
	}
	hc := *c.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", c.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Decode(resp, nil)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if err := line(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("the answer from %s broke off: %w", c.Base, err)
	}
	return nil
}
