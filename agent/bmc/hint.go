package bmc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/app"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/rollcall/rollcall/store/inventory"
)

// InBandDevices are where the kernel's ipmi_devintf puts the host's IPMI
// device, by distribution habit.
var InBandDevices = []string{"/dev/ipmi0", "/dev/ipmi/0", "/dev/ipmidev/0"}

// HasInBand reports whether the host has an IPMI device under root.
func HasInBand(root string) bool {
	for _, d := range InBandDevices {
		if _, err := os.Stat(root + d); err == nil {
			return true
		}
	}
	return false
}

// SetupInBand opens the host's IPMI device and runs Setup over it.
func SetupInBand(ctx context.Context, opts Options) *inventory.BMC {
	c, err := client.NewOpenClient()
	if err == nil {
		err = c.Connect(ctx)
	}
	if err != nil {
		return &inventory.BMC{Driver: "ipmi", Source: "in-band", Errors: []string{fmt.Sprintf("open /dev/ipmi0: %v", err)}}
	}
	defer c.Close(ctx)
	return Setup(ctx, c, opts)
}

// Hint is the appliance's answer to GET /api/v1/bmc-hint: a BMC it was told
// about (bmc_hints) for one of this machine's MACs.
type Hint struct {
	MAC      string `json:"mac"`
	Driver   string `json:"driver"`
	Address  string `json:"address"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// VerifyHint logs in to the hinted BMC out of band and reports it only when
// the login works: a hint that does not is reported with the reason and
// without credentials, so nothing unverified reaches the machine record.
func VerifyHint(ctx context.Context, h Hint) *inventory.BMC {
	out := &inventory.BMC{Driver: h.Driver, Address: h.Address, Source: "hint"}
	var err error
	switch h.Driver {
	case "ipmi", "":
		out.Driver = "ipmi"
		err = loginIPMI(ctx, h)
	case "redfish":
		err = loginRedfish(ctx, h)
	default:
		err = fmt.Errorf("driver %q cannot be verified by the agent (ipmi, redfish)", h.Driver)
	}
	if err != nil {
		out.Errors = append(out.Errors, fmt.Sprintf("hint %s not verified: %v", h.Address, err))
		return out
	}
	out.User, out.Password = h.User, h.Password
	return out
}

// loginIPMI opens an RMCP+ session, cipher suite 17 first and 3 second
// (ipmi_sim and older BMCs refuse 17), and asks for the device ID.
func loginIPMI(ctx context.Context, h Hint) error {
	host, port := h.Address, 623
	if hh, p, err := net.SplitHostPort(h.Address); err == nil {
		host = hh
		if port, err = strconv.Atoi(p); err != nil {
			return fmt.Errorf("address %q: bad port", h.Address)
		}
	}
	var errs []error
	for _, suite := range []types.CipherSuiteID{types.CipherSuiteID17, types.CipherSuiteID3} {
		c, err := client.NewClient(host, port, h.User, h.Password)
		if err != nil {
			return err
		}
		c.WithCipherSuiteID(suite).WithTimeout(2 * time.Second).WithRetry(1)
		if err := c.Connect(ctx); err != nil {
			errs = append(errs, fmt.Errorf("cipher suite %d: %w", suite, err))
			continue
		}
		err = c.Exchange(ctx, &app.GetDeviceIDRequest{}, &app.GetDeviceIDResponse{})
		_ = c.Close(ctx)
		return err
	}
	return fmt.Errorf("login: %v", errs)
}

// loginRedfish reads the Systems collection with basic authentication. The
// BMC's certificate is not checked here: this only proves the credentials;
// the appliance pins the certificate when it first talks to the BMC.
func loginRedfish(ctx context.Context, h Hint) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // credentials check only, see above
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+h.Address+"/redfish/v1/Systems", nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(h.User, h.Password)
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /redfish/v1/Systems: %s", res.Status)
	}
	return nil
}
