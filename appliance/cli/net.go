package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The net verbs: a machine's layout and the addresses pinned to its
// interfaces, and the plan they make (rollcall net show previews what a
// deployment would write).

const netCmdUsage = "rollcall net set ID|NAME [-layout L] [-static IFACE=ADDR ...] [-no-static] | show ID|NAME [-json]"

func cmdNet(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + netCmdUsage)
	}
	switch args[0] {
	case "set":
		return netSet(args[1:], s.stdout)
	case "show":
		return netShow(args[1:], s.stdout)
	}
	return fmt.Errorf("unknown net command %q; usage: %s", args[0], netCmdUsage)
}

func machineNetPath(ref, what string) string {
	return "/api/v1/machines/" + url.PathEscape(ref) + "/" + what
}

func netSet(args []string, stdout io.Writer) error {
	fs := newFlags("net set", "rollcall net set ID|NAME [-layout L] [-static IFACE=ADDR ...] [-no-static]")
	lay := fs.String("layout", "", `the machine's layout ("" clears it: its tags' layout, else the default, applies)`)
	var static listFlag
	fs.Var(&static, "static", "pin ADDR to interface IFACE (repeat it; these replace the machine's pins)")
	noStatic := fs.Bool("no-static", false, "release every pinned address")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var req wire.NetworkRequest
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "layout" {
			req.Layout = lay
		}
	})
	switch {
	case *noStatic && len(static) > 0:
		return errors.New("net set: -static and -no-static together")
	case *noStatic:
		req.Static = map[string]string{}
	case len(static) > 0:
		req.Static = map[string]string{}
		for _, s := range static {
			iface, addr, ok := strings.Cut(s, "=")
			if !ok || iface == "" || addr == "" {
				return fmt.Errorf("-static %q is not IFACE=ADDR (ens18=10.50.0.60)", s)
			}
			if o := req.Static[iface]; o != "" {
				addr = o + "," + addr
			}
			req.Static[iface] = addr
		}
	}
	if req.Layout == nil && req.Static == nil {
		return errors.New("usage: " + fs.usage)
	}
	var v wire.NetworkView
	if err := c.do(http.MethodPut, machineNetPath(fs.Arg(0), "network"), req, &v); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: layout %s, static %s\n", v.Machine, dashOr(v.Layout, "(none: its tags' or the default)"), dash(staticText(v.Static)))
	if v.PlanError != "" {
		fmt.Fprintf(stdout, "warning: the machine has no network plan with these settings: %s\n", v.PlanError)
	}
	return nil
}

func dashOr(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

func staticText(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		for _, a := range strings.Split(m[k], ",") {
			out = append(out, k+"="+a)
		}
	}
	return strings.Join(out, " ")
}

func netShow(args []string, stdout io.Writer) error {
	fs := newFlags("net show", "rollcall net show ID|NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodGet, machineNetPath(fs.Arg(0), "network-plan"), nil, *asJSON, stdout, printPlan)
}

// printPlan is net show for people: the layout and why, what each
// selector chose and why, the addresses, the notes, then the two files.
func printPlan(w io.Writer, p wire.NetworkPlan) error {
	fmt.Fprintf(w, "Machine %s: %s\n", p.Machine, p.Why)
	if len(p.Choices) > 0 {
		fmt.Fprintln(w, "\nNICs:")
		tw := newTable(w)
		fmt.Fprintln(tw, "INTERFACE\tSELECTOR\tNIC\tMAC\tWHY")
		for _, ch := range p.Choices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ch.Interface, ch.Selector, ch.NIC, dash(ch.MAC), ch.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nAddresses (a preview: nothing is allocated until deployment):")
	if len(p.Addresses) == 0 {
		fmt.Fprintln(w, "  none (DHCP or link only)")
	} else {
		tw := newTable(w)
		fmt.Fprintln(tw, "INTERFACE\tADDRESS\tHOW\tWHY")
		for _, a := range p.Addresses {
			how := a.How
			if a.Held {
				how += " (held)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Interface, a.Address, how, a.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(p.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	fmt.Fprintf(w, "\n--- network-config (cloud-init v2, next to the seed)\n%s", p.NetworkConfig)
	_, err := fmt.Fprintf(w, "\n--- %s\n%s", p.UdevRulesPath, p.UdevRules)
	return err
}
