package oscatalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Downloads are bounded: a vendor mirror or an operator's URL may be slow,
// wrong or hostile.
const (
	dialTimeout   = 10 * time.Second
	headerTimeout = 30 * time.Second
	// stallTimeout fails a download that moves no byte for this long.
	stallTimeout = 60 * time.Second
)

// newHTTPClient is the client sync and URL imports use: no redirect to
// another scheme than http(s), bounded dial and header waits, proxies from
// the environment (a mirror behind a proxy).
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout}).DialContext,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: headerTimeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("more than 5 redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL refused", req.URL.Scheme)
		}
		if req.URL.User != nil {
			return errors.New("redirect to a URL with credentials refused")
		}
		return nil
	}}
}

// get opens a URL for reading: a 200 with a body no larger than max (by
// Content-Length when sent). The body fails once it passes max or stalls.
func (c *Catalog) get(ctx context.Context, url string, max int64) (io.ReadCloser, int64, error) {
	c.downloads.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("User-Agent", "rollcall-os-sync")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	if resp.ContentLength > max {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%d bytes, more than the %d allowed", resp.ContentLength, max)
	}
	ctx, cancel := context.WithCancel(ctx)
	body := &boundedBody{rc: resp.Body, max: max, cancel: cancel, declared: resp.ContentLength}
	body.timer = time.AfterFunc(stallTimeout, func() { body.stalled.Store(true); cancel() })
	return body, resp.ContentLength, nil
}

// boundedBody fails past max bytes, short of a declared length, or when no
// byte arrived for stallTimeout.
type boundedBody struct {
	rc       io.ReadCloser
	max, n   int64
	declared int64
	cancel   context.CancelFunc
	timer    *time.Timer
	stalled  atomic.Bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if n > 0 {
		b.timer.Reset(stallTimeout)
	}
	switch {
	case b.n > b.max:
		return n, fmt.Errorf("download passed the %d bytes allowed", b.max)
	case err == io.EOF && b.declared >= 0 && b.n != b.declared:
		return n, fmt.Errorf("download ended after %d of %d bytes: %w", b.n, b.declared, io.ErrUnexpectedEOF)
	case err != nil && err != io.EOF && b.stalled.Load():
		return n, fmt.Errorf("download stalled: no data for %s", stallTimeout)
	}
	return n, err
}

func (b *boundedBody) Close() error {
	b.timer.Stop()
	b.cancel()
	return b.rc.Close()
}

// readSmall fetches a small file (a checksum file) whole.
func (c *Catalog) readSmall(ctx context.Context, url string, max int64) ([]byte, error) {
	body, _, err := c.get(ctx, url, max)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(body)
}

// downloadTo streams a URL into a new file in dir, reporting progress, and
// returns its path. Nothing is left behind on failure.
func (c *Catalog) downloadTo(ctx context.Context, url, dir string, progress func(Progress)) (string, error) {
	body, size, err := c.get(ctx, url, c.cfg.MaxSourceBytes)
	if err != nil {
		return "", err
	}
	defer body.Close()
	f, err := os.CreateTemp(dir, "download-*")
	if err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := copyProgress(f, body, "download", size, progress); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ok = true
	return f.Name(), nil
}

// humanBytes is for messages: 1.5 GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
