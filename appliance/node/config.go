package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/oscatalog"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/pgexport"
)

// FileConfig is rollcall.json in the data directory (or -config FILE): the
// reference's keys that still apply to the appliance. Every key is optional.
type FileConfig struct {
	// AdminToken is accepted for the admin API in addition to the cluster's
	// own token (DATA/admin.token).
	AdminToken string `json:"admin_token,omitempty"`
	// AgentToken is accepted from commissioning agents in addition to the
	// cluster's agent token.
	AgentToken string `json:"agent_token,omitempty"`
	// BMCHints maps a machine's MAC to its out-of-band BMC, for machines
	// without in-band IPMI (VMs behind a virtual BMC).
	BMCHints map[string]BMCHint `json:"bmc_hints,omitempty"`
	// CommissionAppend is added to the commissioning kernel command line.
	CommissionAppend string `json:"commission_append,omitempty"`
	// IPXEDir holds the iPXE binaries TFTP serves (default /usr/lib/ipxe).
	IPXEDir string `json:"ipxe_dir,omitempty"`
	// PXELinuxDir holds lpxelinux.0, served on VLANs whose boot loader is
	// pxelinux (default /usr/lib/PXELINUX, Debian's pxelinux package).
	PXELinuxDir string `json:"pxelinux_dir,omitempty"`
	// SyslinuxDir holds the BIOS modules lpxelinux.0 loads: ldlinux.c32,
	// poweroff.c32, reboot.c32, libcom32.c32 (default
	// /usr/lib/syslinux/modules/bios, Debian's syslinux-common).
	SyslinuxDir string `json:"syslinux_dir,omitempty"`
	// CommissionImage is the boot image commissioning uses (default
	// "commissioning").
	CommissionImage string `json:"commission_image,omitempty"`
	// AdminHTTP decides what plain HTTP may do with the admin API: allow
	// (default), loopback (only from this host) or deny.
	AdminHTTP string `json:"admin_http,omitempty"`
	// TLSNames are extra names and addresses for the node's HTTPS
	// certificate.
	TLSNames []string `json:"tls_names,omitempty"`
	// DeployTimeout fails a deploy or release job whose agent has not
	// reported for this long (a duration: 30m by default);
	// DeployBootTimeout one whose machine never started the agent (1h).
	DeployTimeout     string `json:"deploy_timeout,omitempty"`
	DeployBootTimeout string `json:"deploy_boot_timeout,omitempty"`
	// PostgresExport runs the continuous PostgreSQL mirror on the leader.
	PostgresExport *pgexport.Settings `json:"postgres_export,omitempty"`
	// OSSources are the upstream images `rollcall os sync` follows (name,
	// url, checksum_url, family, track); absent, oscatalog.DefaultSources:
	// Debian 13, Ubuntu 24.04, Rocky 9, AlmaLinux 9, CentOS Stream 9. An
	// empty list follows none.
	OSSources *[]oscatalog.Source `json:"os_sources,omitempty"`
	// OSKeep is how many versions per name pruning keeps (default 3).
	OSKeep int `json:"os_keep,omitempty"`
	// OSSyncInterval is how often the leader syncs os_sources, as a Go
	// duration ("24h", the default; "off" never).
	OSSyncInterval string `json:"os_sync_interval,omitempty"`
	// StatelessRefreshSeconds is how often stateless nodes refresh their
	// runtime overlay, the heartbeat (default 300); a node is stale after
	// two missed refreshes and a minute.
	StatelessRefreshSeconds int `json:"stateless_refresh_seconds,omitempty"`
}

// osSyncInterval is os_sync_interval: 0 the default, negative off.
func (c FileConfig) osSyncInterval() time.Duration {
	switch c.OSSyncInterval {
	case "":
		return 0
	case "off":
		return -1
	}
	d, _ := time.ParseDuration(c.OSSyncInterval)
	return d
}

// osSources is os_sources: nil for the default list.
func (c FileConfig) osSources() []oscatalog.Source {
	if c.OSSources == nil {
		return nil
	}
	return append([]oscatalog.Source{}, *c.OSSources...)
}

// BMCHint is one entry of bmc_hints.
type BMCHint struct {
	Driver   string `json:"driver,omitempty"`
	Address  string `json:"address"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

var adminHTTPModes = []string{"allow", "loopback", "deny"}

// LoadFileConfig reads and checks a configuration file. A missing file is
// an empty configuration when optional is set.
func LoadFileConfig(path string, optional bool) (FileConfig, error) {
	var c FileConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && optional {
		return c, c.check()
	}
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.check(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

func (c *FileConfig) check() error {
	if c.AdminHTTP == "" {
		c.AdminHTTP = "allow"
	}
	ok := false
	for _, m := range adminHTTPModes {
		ok = ok || c.AdminHTTP == m
	}
	if !ok {
		return fmt.Errorf("admin_http: %q is not one of %s", c.AdminHTTP, strings.Join(adminHTTPModes, ", "))
	}
	for _, t := range []struct{ name, v string }{{"admin_token", c.AdminToken}, {"agent_token", c.AgentToken}} {
		if t.v != "" && len(t.v) < 16 {
			return fmt.Errorf("%s: at least 16 characters are required (use `rollcall keygen`)", t.name)
		}
	}
	hints := make(map[string]BMCHint, len(c.BMCHints))
	for mac, h := range c.BMCHints {
		norm, err := store.NormalizeMAC(mac)
		if err != nil {
			return fmt.Errorf("bmc_hints: %w", err)
		}
		if h.Address == "" {
			return fmt.Errorf("bmc_hints[%s]: address is required", mac)
		}
		if h.Driver == "" {
			h.Driver = "ipmi"
		}
		hints[norm] = h
	}
	c.BMCHints = hints
	if c.PostgresExport != nil {
		if err := c.PostgresExport.Check(); err != nil {
			return fmt.Errorf("postgres_export: %w", err)
		}
	}
	if c.OSSources != nil {
		if err := oscatalog.CheckSources(*c.OSSources); err != nil {
			return err
		}
	}
	if c.StatelessRefreshSeconds < 0 || c.StatelessRefreshSeconds > 86400 {
		return fmt.Errorf("stateless_refresh_seconds: %d: give 1 to 86400 (0 is the default, 300)", c.StatelessRefreshSeconds)
	}
	if c.OSKeep < 0 {
		return fmt.Errorf("os_keep: %d: keep at least 1 version (0 is the default, 3)", c.OSKeep)
	}
	if v := c.OSSyncInterval; v != "" && v != "off" {
		if d, err := time.ParseDuration(v); err != nil || d < time.Hour {
			return fmt.Errorf("os_sync_interval: %q is not a duration of an hour or more (\"24h\"), nor \"off\"", v)
		}
	}
	if _, _, err := c.deployTimeouts(); err != nil {
		return err
	}
	for _, n := range c.TLSNames {
		if n == "" || strings.ContainsAny(n, " /") {
			return fmt.Errorf("tls_names: %q is not a host name or address", n)
		}
	}
	return nil
}
