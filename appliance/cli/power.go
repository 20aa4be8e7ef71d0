package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The BMC verbs: power, bootdev, bmc.

// cmdPower is `rollcall power ID|tag:NAME status|on|off|soft|cycle|reset [-json]`.
func cmdPower(args []string, s streams) error {
	fs := newFlags("power", "rollcall power ID|tag:NAME status|on|off|soft|cycle|reset [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	req := wire.PowerRequest{Action: fs.Arg(1)}
	return c.eachMachine(fs.Arg(0), *asJSON, s.stdout, func(id string) outcome {
		return call(c, http.MethodPost, machinePath(id, "power"), req, jobLine)
	})
}

// cmdBootdev is `rollcall bootdev ID|tag:NAME pxe|disk|cdrom|bios|none [-persistent] [-uefi] [-json]`.
func cmdBootdev(args []string, s streams) error {
	fs := newFlags("bootdev", "rollcall bootdev ID|tag:NAME pxe|disk|cdrom|bios|none [-persistent] [-uefi] [-json]")
	persistent := fs.Bool("persistent", false, "keep the device for every boot, not just the next")
	uefi := fs.Bool("uefi", false, "boot in UEFI mode")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	req := wire.BootdevRequest{Device: fs.Arg(1), Persistent: *persistent, UEFI: *uefi}
	return c.eachMachine(fs.Arg(0), *asJSON, s.stdout, func(id string) outcome {
		return call(c, http.MethodPost, machinePath(id, "bootdev"), req, jobLine)
	})
}

func printJob(w io.Writer, j wire.Job) error {
	_, err := fmt.Fprintln(w, jobLine(j))
	return err
}

// jobLine says what a BMC job did, on one line.
func jobLine(j wire.Job) string {
	if !j.Done {
		return fmt.Sprintf("%s %s %s: still running (job %s)", j.Machine, j.Kind, j.Arg, j.ID)
	}
	res := j.Result
	if res == "" {
		res = "ok"
	}
	return fmt.Sprintf("%s %s %s: %s (on %s)", j.Machine, j.Kind, j.Arg, res, j.StartedBy)
}

// cmdBMC is `rollcall bmc ID -driver D -address A -user U -password - [-set k=v] [-verify] [-probe]`,
// `rollcall bmc clear ID [-json]` and `rollcall bmc drivers`. A machine
// named clear or drivers is reached by its ID here.
func cmdBMC(args []string, s streams) error {
	if len(args) > 0 && args[0] == "clear" {
		return cmdBMCClear(args[1:], s)
	}
	if len(args) > 0 && args[0] == "drivers" {
		fs := newFlags("bmc", "")
		c, err := fs.client(args[1:], anyArgs)
		if err != nil {
			return err
		}
		var v wire.DriverList
		if err := c.do(http.MethodGet, "/api/v1/bmc/drivers", nil, &v); err != nil {
			return err
		}
		tw := newTable(s.stdout)
		for _, d := range v.Drivers {
			fmt.Fprintf(tw, "%s\t%s\n", d.Name, d.Description)
		}
		return tw.Flush()
	}
	fs := newFlags("bmc", "rollcall bmc ID -driver D -address A -user U -password - [-set k=v] [-verify] [-probe] | rollcall bmc clear ID [-json] | rollcall bmc drivers")
	var req wire.BMCRequest
	settings := keyValues{}
	fs.StringVar(&req.Driver, "driver", "", "driver (rollcall bmc drivers lists them)")
	fs.StringVar(&req.Address, "address", "", "BMC address (host or host:port)")
	fs.StringVar(&req.User, "user", "", "BMC user")
	password := fs.String("password", "", "'-' reads the password from standard input (never give it on the command line)")
	fs.Var(settings, "set", "driver setting key=value (repeatable)")
	fs.BoolVar(&req.Verify, "verify", false, "log in once to check the credentials")
	fs.BoolVar(&req.Probe, "probe", false, "ask the BMC for vendor, model, firmware and Redfish support")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	ref := fs.Arg(0)
	switch *password {
	case "":
	case "-":
		line, err := bufio.NewReader(s.stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return err
		}
		req.Password = strings.TrimRight(line, "\r\n")
		if req.Password == "" {
			return errors.New("-password -: standard input was empty")
		}
	default:
		return errors.New("-password takes '-' and reads standard input, so the password never shows in the process list")
	}
	if len(settings) > 0 {
		req.Settings = settings
	}
	var raw json.RawMessage
	if err := c.do(http.MethodPut, machinePath(ref, "bmc"), req, &raw); err != nil {
		return err
	}
	if req.Verify || req.Probe {
		var j wire.Job
		json.Unmarshal(raw, &j)
		return printJob(s.stdout, j)
	}
	fmt.Fprintf(s.stdout, "%s: BMC set (%s %s)\n", ref, req.Driver, req.Address)
	return nil
}

// cmdBMCClear is `rollcall bmc clear ID [-json]`: the machine forgets its
// BMC, sealed password included, and is powered by hand until one is set.
func cmdBMCClear(args []string, s streams) error {
	fs := newFlags("bmc clear", "rollcall bmc clear ID|NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodDelete, machinePath(fs.Arg(0), "bmc"), nil, *asJSON, s.stdout, func(w io.Writer, m wire.MachineView) error {
		_, err := fmt.Fprintf(w, "%s: BMC cleared (no driver, address, user or password on record)\n", m.ID)
		return err
	})
}
