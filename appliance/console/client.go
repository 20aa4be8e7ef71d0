package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/rollcall/rollcall/appliance/apiclient"
	"github.com/rollcall/rollcall/appliance/wire"
)

// Client is the console's view of the management API over HTTP(S).
type Client struct{ api *apiclient.Client }

// NewClient returns a client for the API at baseURL with an admin token.
// An https:// URL is checked against caFile (the cluster CA's PEM) when
// given, else against the system roots.
func NewClient(baseURL, token, caFile string) (*Client, error) {
	api, err := apiclient.New(baseURL, token, caFile)
	if err != nil {
		return nil, err
	}
	return &Client{api: api}, nil
}

// NewCertClient returns a client for an https API that signs in with an
// administrator's certificate (its files as client.json names them).
func NewCertClient(baseURL, caFile, certFile, keyFile string) (*Client, error) {
	api, err := apiclient.NewCert(baseURL, caFile, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &Client{api: api}, nil
}

// URL is the API's base URL.
func (c *Client) URL() string { return c.api.Base }

// APIError is a non-2xx answer: the API's code and message.
type APIError = apiclient.Error

// Unauthorized reports whether err is the API refusing the token.
func Unauthorized(err error) bool { return apiclient.Unauthorized(err) }

const (
	readTimeout   = 20 * time.Second
	actionTimeout = 2 * time.Minute // the API waits up to 110 s for a BMC job
)

// do calls the API within timeout ("no leader" answers are retried by the
// client, as the CLI's are).
func (c *Client) do(ctx context.Context, timeout time.Duration, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.api.Do(ctx, method, path, in, out)
}

func machinePath(id string) string { return "/api/v1/machines/" + url.PathEscape(id) }

// Machines implements Source with a blocking query when index > 0.
func (c *Client) Machines(ctx context.Context, index uint64, wait time.Duration) (wire.MachineList, error) {
	path, timeout := "/api/v1/machines", readTimeout
	if index > 0 {
		path += fmt.Sprintf("?index=%d&wait=%s", index, wait)
		timeout += wait
	}
	var l wire.MachineList
	err := c.do(ctx, timeout, http.MethodGet, path, nil, &l)
	return l, err
}

// Machine implements Source.
func (c *Client) Machine(ctx context.Context, id string) (wire.MachineDetail, error) {
	var d wire.MachineDetail
	err := c.do(ctx, readTimeout, http.MethodGet, machinePath(id), nil, &d)
	return d, err
}

// Jobs implements Source.
func (c *Client) Jobs(ctx context.Context, id string) ([]wire.Job, error) {
	var v wire.JobList
	err := c.do(ctx, readTimeout, http.MethodGet, machinePath(id)+"/jobs", nil, &v)
	return v.Jobs, err
}

// eventMachines bounds how many machines' histories Events reads.
const eventMachines = 20

// Events implements Source. The API keeps events per machine, so this
// reads the histories of the most recently updated machines and merges
// them.
func (c *Client) Events(ctx context.Context, limit int) ([]wire.Event, error) {
	var v wire.RecentEvents
	if err := c.do(ctx, readTimeout, http.MethodGet, fmt.Sprintf("/api/v1/events?limit=%d", limit), nil, &v); err != nil {
		return nil, err
	}
	sortEvents(v.Events)
	return v.Events[:min(len(v.Events), limit)], nil
}

// sortEvents orders events newest first.
func sortEvents(es []wire.Event) {
	slices.SortStableFunc(es, func(a, b wire.Event) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return int(b.Index) - int(a.Index)
	})
}

// Cluster implements Source.
func (c *Client) Cluster(ctx context.Context) (wire.ClusterView, error) {
	var v wire.ClusterView
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/cluster", nil, &v)
	return v, err
}

// Network implements Source.
func (c *Client) Network(ctx context.Context) (Network, error) {
	var (
		f wire.FabricList
		v wire.VLANList
		s wire.SubnetList
	)
	for path, out := range map[string]any{"/api/v1/fabrics": &f, "/api/v1/vlans": &v, "/api/v1/subnets": &s} {
		if err := c.do(ctx, readTimeout, http.MethodGet, path, nil, out); err != nil {
			return Network{}, err
		}
	}
	return Network{Fabrics: f.Fabrics, VLANs: v.VLANs, Subnets: s.Subnets}, nil
}

// Images implements Source.
func (c *Client) Images(ctx context.Context) ([]wire.Image, error) {
	var v wire.ImageList
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/images", nil, &v)
	return v.Images, err
}

// Doctor implements Source. The checks probe (DHCP on every served VLAN
// listens for seconds): it waits longer than a read.
func (c *Client) Doctor(ctx context.Context) (wire.DoctorReport, error) {
	var v wire.DoctorReport
	err := c.do(ctx, 2*readTimeout, http.MethodGet, "/api/v1/doctor", nil, &v)
	return v, err
}

// CA implements Source.
func (c *Client) CA(ctx context.Context) (wire.CAState, error) {
	var v wire.CAState
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/ca", nil, &v)
	return v, err
}

// Access implements Source.
func (c *Client) Access(ctx context.Context) (wire.CertList, wire.AuditLog, error) {
	var certs wire.CertList
	var audit wire.AuditLog
	if err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/ca/certificates", nil, &certs); err != nil {
		return certs, audit, err
	}
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/audit?limit=50", nil, &audit)
	return certs, audit, err
}

// Racks implements Source.
func (c *Client) Racks(ctx context.Context) ([]wire.Rack, error) {
	var v wire.RackList
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/racks", nil, &v)
	return v.Racks, err
}

// Rack implements Source.
func (c *Client) Rack(ctx context.Context, name string) (wire.RackDetail, error) {
	var v wire.RackDetail
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/racks/"+url.PathEscape(name), nil, &v)
	return v, err
}

// Tags implements Source.
func (c *Client) Tags(ctx context.Context) ([]wire.Tag, error) {
	var v wire.TagList
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/tags", nil, &v)
	return v.Tags, err
}

// Tag implements Source.
func (c *Client) Tag(ctx context.Context, name string) (wire.TagDetail, error) {
	var v wire.TagDetail
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/tags/"+url.PathEscape(name), nil, &v)
	return v, err
}

// Plan implements Source.
func (c *Client) Plan(ctx context.Context, id string) (wire.NetworkPlan, error) {
	var v wire.NetworkPlan
	err := c.do(ctx, readTimeout, http.MethodGet, machinePath(id)+"/network-plan", nil, &v)
	return v, err
}

// Do implements Source.
func (c *Client) Do(ctx context.Context, a Action) (string, error) {
	if out, ok, err := c.doDeploy(ctx, a); ok {
		return out, err
	}
	if out, ok, err := c.doStateless(ctx, a); ok {
		return out, err
	}
	p := machinePath(a.Machine)
	switch a.Kind {
	case "power":
		var j wire.Job
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/power", wire.PowerRequest{Action: a.Arg}, &j); err != nil {
			return "", err
		}
		return jobOutcome(j), nil
	case "bootdev":
		var j wire.Job
		if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/bootdev", wire.BootdevRequest{Device: a.Arg}, &j); err != nil {
			return "", err
		}
		return jobOutcome(j), nil
	case "recommission":
		if a.Arg == "now" {
			var j wire.Job
			if err := c.do(ctx, actionTimeout, http.MethodPost, p+"/recommission?now=1", nil, &j); err != nil {
				return "", err
			}
			return jobOutcome(j), nil
		}
		var m wire.MachineView
		if err := c.do(ctx, readTimeout, http.MethodPost, p+"/recommission", nil, &m); err != nil {
			return "", err
		}
		return m.State + ", commissions on its next network boot", nil
	case "delete":
		return "deleted", c.do(ctx, readTimeout, http.MethodDelete, p, nil, nil)
	case "rename":
		var m wire.MachineView
		if err := c.do(ctx, readTimeout, http.MethodPost, p+"/rename", wire.RenameMachineRequest{Name: a.Arg}, &m); err != nil {
			return "", err
		}
		return "named " + m.Name, nil
	case "bmc-clear":
		if err := c.do(ctx, readTimeout, http.MethodDelete, p+"/bmc", nil, nil); err != nil {
			return "", err
		}
		return "BMC cleared: powered by hand until one is set", nil
	}
	return "", fmt.Errorf("action %q: not one of power, bootdev, recommission, delete, deploy, release, cancel, rename, bmc-clear, assign, unassign", a.Kind)
}

// jobOutcome says how a BMC job ended; a job still running when the API
// stopped waiting (202) is reported as such.
func jobOutcome(j wire.Job) string {
	switch {
	case !j.Done:
		return "still running (job " + j.ID + ")"
	case j.Result != "":
		return j.Result
	}
	return "done"
}
