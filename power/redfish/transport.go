package redfish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/power"
)

// guard is the RoundTripper under gofish. It enforces two reference rules for
// every request, whoever built it:
//
//   - Paths from the BMC are only followed if they stay on the BMC and under
//     /redfish/ (a Location, an @odata.id or a settings link could point
//     anywhere; credentials would follow them).
//   - Busy answers are retried for up to a minute: 503, a 409 that says it
//     is temporary, "Retry in N seconds", and the vendor messages a profile
//     lists (iLO refuses boot changes during POST with a 400).
type guard struct {
	next    http.RoundTripper
	base    *url.URL
	busy    []string // profile's busy message fragments
	timeout time.Duration
	attempt time.Duration // bound on one request until its headers arrive
	sleep   func(ctx context.Context, d time.Duration) error
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := checkURL(g.base, req.URL); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(g.timeout)
	backoff := 500 * time.Millisecond
	for attempt := 1; ; attempt++ {
		resp, err := g.roundTrip(req)
		if err != nil {
			return nil, err
		}
		wait, busy := g.busyAnswer(resp)
		if !busy {
			return resp, nil
		}
		if wait < 0 {
			wait = backoff
			backoff = min(backoff*2, 8*time.Second)
		}
		wait = min(wait, 15*time.Second)
		if time.Now().Add(wait).After(deadline) {
			resp.Body.Close()
			return nil, fmt.Errorf("%w: %s %s answered %d %d times over %s", power.ErrBusy,
				req.Method, req.URL.Path, resp.StatusCode, attempt, g.timeout)
		}
		if req.Body != nil && req.GetBody == nil {
			return resp, nil // cannot replay the body
		}
		if err := g.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// roundTrip sends one request with the per-request bound: a BMC that
// accepts the connection and then stalls costs g.attempt, not the caller's
// whole deadline.
func (g *guard) roundTrip(req *http.Request) (*http.Response, error) {
	if g.attempt <= 0 {
		return g.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), g.attempt)
	resp, err := g.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stalled := ctx.Err() == context.DeadlineExceeded && req.Context().Err() == nil
		cancel()
		if stalled {
			return nil, fmt.Errorf("%w: no answer to %s %s within %s", power.ErrUnreachable, req.Method, req.URL.Path, g.attempt)
		}
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

var retryIn = regexp.MustCompile(`(?i)retry (?:in|after) (\d+) ?s`)

// busyAnswer reads a non-2xx answer (restoring its body) and says whether it
// means "busy, ask again" and after how long.
func (g *guard) busyAnswer(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode < 400 {
		return -1, false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	text := string(body)
	wait := retryAfter(resp.Header.Get("Retry-After"))
	if m := retryIn.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		wait = time.Duration(n) * time.Second
		return wait, true
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		return wait, true
	case http.StatusConflict:
		// A 409 is a real conflict unless the BMC says it is temporary:
		// right after a power change several BMCs answer 409 with a
		// Retry-After or an "in progress" message.
		if resp.Header.Get("Retry-After") != "" || temporary.MatchString(text) {
			return wait, true
		}
	}
	for _, b := range g.busy {
		if strings.Contains(text, b) {
			return wait, true
		}
	}
	return -1, false
}

var temporary = regexp.MustCompile(`(?i)in progress|busy|try again|not ready|retry|during (?:system )?post`)

// retryAfter parses a Retry-After header; -1 when there is none.
func retryAfter(h string) time.Duration {
	if h == "" {
		return -1
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return -1
}

// checkURL allows only the BMC's own scheme://host:port and paths under
// /redfish/ without dot segments.
func checkURL(base, u *url.URL) error {
	if u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) {
		return fmt.Errorf("%w: %s is not on %s", power.ErrUnsafeLink, u.Redacted(), base.Host)
	}
	return checkPath(u.EscapedPath())
}

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/redfish/") && p != "/redfish" {
		return fmt.Errorf("%w: path %q is not under /redfish/", power.ErrUnsafeLink, p)
	}
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Errorf("%w: path %q: %v", power.ErrUnsafeLink, p, err)
	}
	for _, seg := range strings.Split(unescaped, "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("%w: path %q has dot segments", power.ErrUnsafeLink, p)
		}
	}
	if c := path.Clean(unescaped); !strings.HasPrefix(c+"/", "/redfish/") {
		return fmt.Errorf("%w: path %q is not under /redfish/", power.ErrUnsafeLink, p)
	}
	return nil
}

// resolveLink turns a link found in a BMC answer (absolute URL or path) into
// a path on this BMC, or fails if it leaves the BMC or /redfish/.
func resolveLink(base *url.URL, link string) (string, error) {
	if link == "" {
		return "", fmt.Errorf("%w: empty link", power.ErrBadAnswer)
	}
	u, err := url.Parse(link)
	if err != nil {
		return "", fmt.Errorf("%w: link %q: %v", power.ErrUnsafeLink, link, err)
	}
	if u.IsAbs() || u.Host != "" {
		if u.Scheme == "" {
			u.Scheme = base.Scheme
		}
		if err := checkURL(base, u); err != nil {
			return "", err
		}
	} else if err := checkPath(u.EscapedPath()); err != nil {
		return "", err
	}
	p := u.EscapedPath()
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
