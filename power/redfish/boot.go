package redfish

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish"

	"github.com/rollcall/rollcall/power"
)

var bootTargets = map[power.Device]string{
	power.DevicePXE:   "Pxe",
	power.DeviceDisk:  "Hdd",
	power.DeviceCDROM: "Cd",
	power.DeviceBIOS:  "BiosSetup",
}

// SetBootDevice sets the boot override in one PATCH (target, enabled and,
// per profile, mode), on the settings resource when the BMC keeps pending
// settings elsewhere. Device none clears the override the profile's way.
func (d *Driver) SetBootDevice(ctx context.Context, b power.BootDevice) error {
	if _, err := power.ParseDevice(string(b.Device)); err != nil {
		return d.fail("set boot device", err)
	}
	step := "set boot device " + string(b.Device)
	if b.Persistent && d.p.OnceOnly && b.Device != power.DeviceNone {
		return d.fail(step, fmt.Errorf("%w: %s accepts only one-time boot overrides", power.ErrUnsupported, d.p.Vendor))
	}
	ctx, cancel := d.withTimeout(ctx)
	defer cancel()
	err := d.do(ctx, func(c *gofish.APIClient) error {
		s, etag, err := d.system(c)
		if err != nil {
			return err
		}
		boot, modeSent, err := d.bootBody(s, b)
		if err != nil {
			return d.fail(step, err)
		}
		where, whereETag := d.systemPath, etag
		if sp := d.settingsPath(s); sp != "" {
			var pending map[string]any
			tag, err := get(c, sp, &pending)
			switch {
			case err == nil:
				where, whereETag = sp, tag
			case statusOf(err) == http.StatusNotFound:
				d.log.Debug("settings resource missing; patching the system", "settings", sp)
			default:
				return d.fail(step+" (read settings "+sp+")", err)
			}
		}
		err = d.patch(ctx, c, step, where, whereETag, map[string]any{"Boot": boot})
		if err != nil && statusOf(err) == http.StatusBadRequest && modeSent && d.s.BootMode == "" && d.p.BootMode == BootModeCurrentOrNone {
			// "Current one, without it if refused."
			d.log.Info("boot override with mode refused; sending it without the mode", "mode", boot["BootSourceOverrideMode"])
			delete(boot, "BootSourceOverrideMode")
			err = d.patch(ctx, c, step+" (without boot mode)", where, "", map[string]any{"Boot": boot})
		}
		if err != nil && statusOf(err) == http.StatusBadRequest && d.p.VerifyAfter400 {
			var back systemDoc
			if _, gerr := get(c, where, &back); gerr == nil && bootMatches(back.Boot, boot) {
				d.log.Info("boot override answered 400 but applied", "resource", where)
				return nil
			}
		}
		return err
	})
	if err != nil {
		return d.fail(step, err)
	}
	return nil
}

// bootBody builds the Boot object of the PATCH from what the BMC advertises.
func (d *Driver) bootBody(s systemDoc, b power.BootDevice) (map[string]any, bool, error) {
	boot := map[string]any{}
	if b.Device == power.DeviceNone {
		if d.p.Clear == ClearTargetNone {
			boot["BootSourceOverrideTarget"] = "None"
		} else {
			boot["BootSourceOverrideEnabled"] = "Disabled"
		}
		return boot, false, nil
	}
	target := bootTargets[b.Device]
	if al := s.Boot.AllowedTargets; len(al) > 0 && !slices.Contains(al, target) {
		return nil, false, fmt.Errorf("%w: boot target %s; the bmc offers %s", power.ErrUnsupported, target, strings.Join(al, ", "))
	}
	enabled := "Once"
	if b.Persistent {
		enabled = "Continuous"
	}
	if al := s.Boot.AllowedEnabled; len(al) > 0 && !slices.Contains(al, enabled) {
		return nil, false, fmt.Errorf("%w: boot override %s; the bmc offers %s", power.ErrUnsupported, enabled, strings.Join(al, ", "))
	}
	boot["BootSourceOverrideTarget"] = target
	boot["BootSourceOverrideEnabled"] = enabled
	mode := d.s.BootMode // boot_mode=: always send this mode
	if mode == "" && d.p.BootMode != BootModeOmit {
		mode = s.Boot.Mode
		if mode == "" && d.p.BootMode == BootModeAlways {
			mode = "Legacy"
			if b.UEFI {
				mode = "UEFI"
			}
		}
	}
	if mode != "" {
		boot["BootSourceOverrideMode"] = mode
	}
	return boot, mode != "", nil
}

func bootMatches(got bootDoc, want map[string]any) bool {
	for k, v := range want {
		var g string
		switch k {
		case "BootSourceOverrideTarget":
			g = got.Target
		case "BootSourceOverrideEnabled":
			g = got.Enabled
		case "BootSourceOverrideMode":
			g = got.Mode
		}
		if g != v {
			return false
		}
	}
	return true
}

// settingsPath is where pending settings live: @Redfish.Settings, else the
// profile's suffix (ASRock Rack's …/SD).
func (d *Driver) settingsPath(s systemDoc) string {
	if s.Settings != nil && s.Settings.SettingsObject.ID != "" {
		p, err := resolveLink(d.base, s.Settings.SettingsObject.ID)
		if err != nil {
			d.log.Warn("ignoring settings link", "err", err)
			return ""
		}
		if strings.TrimSuffix(p, "/") != strings.TrimSuffix(d.systemPath, "/") {
			return p
		}
		return ""
	}
	if d.p.SettingsSuffix != "" {
		return strings.TrimSuffix(d.systemPath, "/") + "/" + d.p.SettingsSuffix
	}
	return ""
}

// patch sends one PATCH with If-Match: the ETag as read; on 428 the ETag is
// fetched first; on 412 the strong form is tried, then no If-Match at all.
func (d *Driver) patch(ctx context.Context, c *gofish.APIClient, step, p, etag string, body any) error {
	send := func(tag string) (*http.Response, error) {
		h := map[string]string{}
		if tag != "" {
			h["If-Match"] = tag
		}
		return c.PatchWithHeaders(p, body, h)
	}
	resp, err := send(etag)
	if statusOf(err) == http.StatusPreconditionRequired {
		var doc map[string]any
		fresh, gerr := get(c, p, &doc)
		if gerr != nil {
			return d.fail(step+" (read ETag of "+p+")", gerr)
		}
		if fresh == "" {
			return d.fail(step, fmt.Errorf("http 428: the bmc requires If-Match but %s has no ETag", p))
		}
		etag = fresh
		resp, err = send(etag)
	}
	if statusOf(err) == http.StatusPreconditionFailed && etag != "" {
		if strong := strings.TrimPrefix(etag, "W/"); strong != etag {
			resp, err = send(strong)
		}
		if statusOf(err) == http.StatusPreconditionFailed {
			resp, err = send("")
		}
	}
	if err != nil {
		return d.fail(step+" (PATCH "+p+")", err)
	}
	return d.follow(ctx, c, step, resp)
}
