package redfish

import (
	"context"
	"log/slog"
	"net"
	"strings"

	"github.com/rollcall/rollcall/power"
)

// DetectRedfish asks a BMC known by IPMI whether it speaks Redfish with the
// same account and returns the driver for its vendor ("idrac", "ilo", …, or
// "redfish" when no vendor profile matches). The Redfish address is the
// setting redfish_address when set, else https://<host of t.Address>.
//
// Pin the certificate before calling: read it with power.FetchCertificate,
// record it, and pass it as t.PinnedCertSHA256; without a pin the
// certificate is read and trusted for this one call. A BMC without Redfish
// fails with power.ErrNoRedfish, refused credentials with power.ErrAuth.
// The caller records the `bmc driver` event and never overrides a driver an
// operator chose.
func DetectRedfish(ctx context.Context, t power.Target) (string, error) {
	return DetectRedfishWith(ctx, t, Options{}, nil)
}

// DetectRedfishWith is DetectRedfish with driver options and a logger.
func DetectRedfishWith(ctx context.Context, t power.Target, opt Options, log *slog.Logger) (string, error) {
	rt := t
	rt.Address = redfishAddress(t)
	d, err := New(rt, Standard, opt, log)
	if err != nil {
		return "", err
	}
	defer d.Close()
	res, err := d.Probe(ctx)
	if err != nil {
		return "", err
	}
	return res.Driver, nil
}

func redfishAddress(t power.Target) string {
	if a := t.Setting("redfish_address", ""); a != "" {
		return a
	}
	a := t.Address
	if strings.Contains(a, "://") {
		return a
	}
	if h, _, err := net.SplitHostPort(a); err == nil {
		return net.JoinHostPort(h, "443")
	}
	return a
}
