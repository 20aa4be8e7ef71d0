package console

import (
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
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Client is the console's view of the management API over HTTP(S).
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for the API at baseURL with an admin token.
// An https:// URL is checked against caFile (the cluster CA's PEM) when
// given, else against the system roots.
func NewClient(baseURL, token, caFile string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api url %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("api token: empty")
	}
	c := &Client{base: u.String(), token: strings.TrimSpace(token), http: &http.Client{}}
	if u.Scheme == "https" && caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("cluster ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster ca: %s holds no PEM certificate", caFile)
		}
		c.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// URL is the API's base URL.
func (c *Client) URL() string { return c.base }

// APIError is a non-2xx answer: the API's code and message.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Message }

// Unauthorized reports whether err is the API refusing the token.
func Unauthorized(err error) bool {
	var e *APIError
	return errors.As(err, &e) && (e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden)
}

const (
	readTimeout   = 20 * time.Second
	actionTimeout = 2 * time.Minute // the API waits up to 110 s for a BMC job
)

// do calls the API. "no leader" answers mean nothing was applied, so it
// retries them for a while (an election), as the CLI does.
func (c *Client) do(ctx context.Context, timeout time.Duration, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var payload []byte
	if in != nil {
		var err error
		if payload, err = json.Marshal(in); err != nil {
			return err
		}
	}
	for {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("cannot reach %s: %w", c.base, err)
		}
		err = decode(resp, out)
		resp.Body.Close()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != "no_leader" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func decode(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return &APIError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
		}
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func machinePath(id string) string { return "/api/v1/machines/" + url.PathEscape(id) }

// Machines implements Source with a blocking query when index > 0.
func (c *Client) Machines(ctx context.Context, index uint64, wait time.Duration) (MachineList, error) {
	path, timeout := "/api/v1/machines", readTimeout
	if index > 0 {
		path += fmt.Sprintf("?index=%d&wait=%s", index, wait)
		timeout += wait
	}
	var l MachineList
	err := c.do(ctx, timeout, http.MethodGet, path, nil, &l)
	return l, err
}

// Machine implements Source.
func (c *Client) Machine(ctx context.Context, id string) (MachineDetail, error) {
	var d MachineDetail
	err := c.do(ctx, readTimeout, http.MethodGet, machinePath(id), nil, &d)
	return d, err
}

// Jobs implements Source.
func (c *Client) Jobs(ctx context.Context, id string) ([]store.Job, error) {
	var v struct {
		Jobs []store.Job `json:"jobs"`
	}
	err := c.do(ctx, readTimeout, http.MethodGet, machinePath(id)+"/jobs", nil, &v)
	return v.Jobs, err
}

// eventMachines bounds how many machines' histories Events reads.
const eventMachines = 20

// Events implements Source. The API keeps events per machine, so this
// reads the histories of the most recently updated machines and merges
// them.
func (c *Client) Events(ctx context.Context, limit int) ([]store.Event, error) {
	var v struct {
		Events []store.Event `json:"events"`
	}
	if err := c.do(ctx, readTimeout, http.MethodGet, fmt.Sprintf("/api/v1/events?limit=%d", limit), nil, &v); err != nil {
		return nil, err
	}
	sortEvents(v.Events)
	return v.Events[:min(len(v.Events), limit)], nil
}

// sortEvents orders events newest first.
func sortEvents(es []store.Event) {
	slices.SortStableFunc(es, func(a, b store.Event) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return int(b.Index) - int(a.Index)
	})
}

// Cluster implements Source.
func (c *Client) Cluster(ctx context.Context) (ClusterView, error) {
	var v ClusterView
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/cluster", nil, &v)
	return v, err
}

// Network implements Source.
func (c *Client) Network(ctx context.Context) (Network, error) {
	var (
		f struct {
			Fabrics []store.Fabric `json:"fabrics"`
		}
		v struct {
			VLANs []store.VLAN `json:"vlans"`
		}
		s struct {
			Subnets []Subnet `json:"subnets"`
		}
	)
	for path, out := range map[string]any{"/api/v1/fabrics": &f, "/api/v1/vlans": &v, "/api/v1/subnets": &s} {
		if err := c.do(ctx, readTimeout, http.MethodGet, path, nil, out); err != nil {
			return Network{}, err
		}
	}
	return Network{Fabrics: f.Fabrics, VLANs: v.VLANs, Subnets: s.Subnets}, nil
}

// Images implements Source.
func (c *Client) Images(ctx context.Context) ([]store.Image, error) {
	var v struct {
		Images []store.Image `json:"images"`
	}
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/images", nil, &v)
	return v.Images, err
}

// Do implements Source.
func (c *Client) Do(ctx context.Context, a Action) (string, error) {
	p := machinePath(a.Machine)
	switch a.Kind {
	case "power":
		var j store.Job
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/power", map[string]string{"action": a.Arg}, &j); err != nil {
			return "", err
		}
		return jobOutcome(j), nil
	case "bootdev":
		var j store.Job
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/bootdev", map[string]any{"device": a.Arg}, &j); err != nil {
			return "", err
		}
		return jobOutcome(j), nil
	case "recommission":
		if a.Arg == "now" {
			var j store.Job
			if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/recommission?now=1", nil, &j); err != nil {
				return "", err
			}
			return jobOutcome(j), nil
		}
		var m Machine
		if err := c.do(ctx, readTimeout, http.MethodPost, p+"/recommission", nil, &m); err != nil {
			return "", err
		}
		return m.State + ", commissions on its next network boot", nil
	case "delete":
		return "deleted", c.do(ctx, readTimeout, http.MethodDelete, p, nil, nil)
	}
	return "", fmt.Errorf("action %q: not one of power, bootdev, recommission, delete", a.Kind)
}

// jobOutcome says how a BMC job ended; a job still running when the API
// stopped waiting (202) is reported as such.
func jobOutcome(j store.Job) string {
	switch {
	case !j.Done:
		return "still running (job " + j.ID + ")"
	case j.Result != "":
		return j.Result
	}
	return "done"
}
