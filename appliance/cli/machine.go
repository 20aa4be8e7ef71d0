package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The machine verbs: list, show, events, add, delete, recommission, and
// the machine noun (machine rename).

// cmdList is `rollcall list [-state S] [-q TEXT] [-tag T] [-rack R] [-json] [-watch]`.
func cmdList(args []string, s streams) error {
	fs := newFlags("list", "")
	state := fs.String("state", "", "only machines in this state")
	q := fs.String("q", "", "match name, serial, MAC or IP")
	tag := fs.String("tag", "", "only machines that carry this tag (manual or auto)")
	rack := fs.String("rack", "", "only machines in this rack")
	asJSON := fs.Bool("json", false, "print JSON")
	watch := fs.Bool("watch", false, "print again on every change")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	var index uint64
	for {
		v := url.Values{}
		if *state != "" {
			v.Set("state", *state)
		}
		if *q != "" {
			v.Set("q", *q)
		}
		if *tag != "" {
			v.Set("tag", *tag)
		}
		if *rack != "" {
			v.Set("rack", *rack)
		}
		if *watch && index > 0 {
			v.Set("index", fmt.Sprint(index))
			v.Set("wait", "5m")
		}
		// Not fetch: the watch needs the list's index, -json or not.
		var raw json.RawMessage
		if err := c.do(http.MethodGet, "/api/v1/machines?"+v.Encode(), nil, &raw); err != nil {
			return err
		}
		var list wire.MachineList
		if err := json.Unmarshal(raw, &list); err != nil {
			return err
		}
		if !*watch || list.Index != index {
			if *watch && index > 0 {
				fmt.Fprintf(s.stdout, "\n-- %s, index %d --\n", time.Now().Format(time.TimeOnly), list.Index)
			}
			if *asJSON {
				err = printJSON(s.stdout, raw)
			} else {
				err = printMachines(s.stdout, list.Machines)
			}
			if err != nil {
				return err
			}
		}
		if !*watch {
			return nil
		}
		index = list.Index
	}
}

func printMachines(w io.Writer, ms []wire.MachineView) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tSERIAL\tBOOT MAC\tPRODUCT\tCPU\tMEMORY\tDISKS\tGPUS\tBMC\tUPDATED\tLOCATION\tTAGS")
	for _, m := range ms {
		s := m.Summary
		cpu, mem, disks, gpus, bmc := "-", "-", "-", "-", "-"
		if s.Sockets > 0 {
			cpu = fmt.Sprintf("%dx%dc", s.Sockets, s.Cores/max(s.Sockets, 1))
		}
		if s.MemoryBytes > 0 {
			mem = fmt.Sprintf("%d GiB", s.MemoryBytes>>30)
		}
		if s.Disks > 0 {
			disks = fmt.Sprintf("%d (%s)", s.Disks, humanBytes(s.DiskBytes))
		}
		if s.GPUs > 0 {
			gpus = fmt.Sprint(s.GPUs)
		}
		if m.BMC != nil && m.BMC.Address != "" {
			bmc = m.BMC.Address
			if len(m.BMC.Errors) > 0 {
				bmc += " (errors)"
			}
		}
		product := strings.TrimSpace(s.Manufacturer + " " + s.Product)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, dash(m.Name), m.State, dash(m.Serial), dash(m.BootMAC),
			dash(product), cpu, mem, disks, gpus, bmc, m.UpdatedAt.Local().Format("2006-01-02 15:04"), placeText(m.Location), tagsText(m.Tags, m.AutoTags))
	}
	return tw.Flush()
}

// machinePath is the API path of the machine ref names (ID or name), with
// what follows.
func machinePath(ref string, sub ...string) string {
	p := "/api/v1/machines/" + url.PathEscape(ref)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// cmdShow is `rollcall show ID|NAME [-json]`.
func cmdShow(args []string, s streams) error {
	return reader[wire.MachineDetail]{name: "show", usage: "rollcall show ID|NAME [-json]", nargs: 1,
		path: func(a []string) (string, error) { return machinePath(a[0]), nil }, table: printDetail}.run(args, s.stdout)
}

func printDetail(w io.Writer, d wire.MachineDetail) error {
	m, s := d.MachineView, d.Summary
	rows := [][2]string{
		{"ID", m.ID}, {"Name", dash(m.Name)}, {"State", m.State}, {"System UUID", dash(m.SystemUUID)},
		{"Serial", dash(m.Serial)}, {"Identity", dash(m.IdentityKey)}, {"MACs", dash(strings.Join(m.MACs, ", "))},
		{"Boot MAC", dash(m.BootMAC)}, {"IPs", dash(strings.Join(m.IPs, ", "))},
		{"Product", dash(strings.TrimSpace(s.Manufacturer + " " + s.Product))},
	}
	if s.Sockets > 0 {
		rows = append(rows, [2]string{"CPU", fmt.Sprintf("%d × %s (%d cores, %d threads)", s.Sockets, s.CPUModel, s.Cores, s.Threads)})
	}
	if s.MemoryBytes > 0 {
		rows = append(rows, [2]string{"Memory", fmt.Sprintf("%d GiB in %d DIMMs", s.MemoryBytes>>30, s.DIMMs)})
	}
	if s.Disks > 0 || s.NVMe > 0 {
		rows = append(rows, [2]string{"Disks", fmt.Sprintf("%d, %s (%d NVMe controllers)", s.Disks, humanBytes(s.DiskBytes), s.NVMe)})
	}
	if s.NICs > 0 || s.IBHCAs > 0 {
		rows = append(rows, [2]string{"Network", fmt.Sprintf("%d NICs, %d InfiniBand HCAs", s.NICs, s.IBHCAs)})
	}
	if s.GPUs > 0 {
		rows = append(rows, [2]string{"GPUs", fmt.Sprintf("%d (%s)", s.GPUs, strings.Join(s.GPUModels, ", "))})
	}
	if b := d.BMC; b != nil {
		pw := "no password"
		if b.HasPassword {
			pw = "password sealed"
		}
		rows = append(rows, [2]string{"BMC", fmt.Sprintf("%s %s user %s (%s)", dash(b.Driver), dash(b.Address), dash(b.User), pw)})
		for _, e := range b.Errors {
			rows = append(rows, [2]string{"BMC error", e})
		}
	}
	rows = append(rows, [2]string{"Location", placeText(m.Location)}, [2]string{"Tags", dash(strings.Join(m.Tags, ", "))},
		[2]string{"Auto tags", dash(strings.Join(m.AutoTags, ", "))})
	rows = append(rows, [2]string{"Created", m.CreatedAt.Local().Format(time.RFC3339)}, [2]string{"Updated", m.UpdatedAt.Local().Format(time.RFC3339)})
	if !m.Commissioned.IsZero() {
		rows = append(rows, [2]string{"Commissioned", m.Commissioned.Local().Format(time.RFC3339)})
	}
	if err := printRows(w, rows); err != nil {
		return err
	}
	if len(d.Events) > 0 {
		fmt.Fprintln(w, "\nEvents:")
		return printEvents(w, d.Events)
	}
	return nil
}

func printEvents(w io.Writer, events []wire.Event) error {
	tw := newTable(w)
	for _, e := range events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05"), e.Kind, e.Message)
	}
	return tw.Flush()
}

// cmdEvents is `rollcall events ID|NAME [-json]`.
func cmdEvents(args []string, s streams) error {
	return reader[wire.EventList]{name: "events", usage: "rollcall events ID|NAME [-json]", nargs: 1,
		path:  func(a []string) (string, error) { return machinePath(a[0], "events"), nil },
		table: func(w io.Writer, v wire.EventList) error { return printEvents(w, v.Events) }}.run(args, s.stdout)
}

// cmdRecommission is `rollcall recommission ID|NAME|tag:NAME [-now] [-json]`.
func cmdRecommission(args []string, s streams) error {
	fs := newFlags("recommission", "rollcall recommission ID|NAME|tag:NAME [-now] [-json]")
	now := fs.Bool("now", false, "power-cycle into the commissioning image at once through the BMC")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return c.eachMachine(fs.Arg(0), *asJSON, s.stdout, func(id string) outcome {
		path := machinePath(id, "recommission")
		if *now {
			return call(c, http.MethodPost, path+"?now=1", nil, jobLine)
		}
		return call(c, http.MethodPost, path, nil, func(m wire.MachineView) string {
			return fmt.Sprintf("%s: %s (commissions again on its next network boot)", m.ID, m.State)
		})
	})
}

// cmdAdd is `rollcall add [-name NAME] [-mac MAC]`.
func cmdAdd(args []string, s streams) error {
	fs := newFlags("add", "")
	name := fs.String("name", "", "machine name (a DNS label)")
	mac := fs.String("mac", "", "boot MAC address")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	var m wire.MachineView
	if err := c.do(http.MethodPost, "/api/v1/machines", wire.CreateMachineRequest{Name: *name, MAC: *mac}, &m); err != nil {
		return err
	}
	fmt.Fprintln(s.stdout, m.ID)
	return nil
}

// cmdMachine is `rollcall machine rename ID|NAME NEWNAME [-json]`.
func cmdMachine(args []string, s streams) error {
	const use = "rollcall machine rename ID|NAME NEWNAME [-json]"
	if len(args) == 0 || args[0] != "rename" {
		return fmt.Errorf("usage: %s", use)
	}
	fs := newFlags("machine rename", use)
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args[1:], 2)
	if err != nil {
		return err
	}
	req := wire.RenameMachineRequest{Name: fs.Arg(1)}
	return fetch(c, http.MethodPost, machinePath(fs.Arg(0), "rename"), req, *asJSON, s.stdout, func(w io.Writer, m wire.MachineView) error {
		_, err := fmt.Fprintf(w, "%s: named %s\n", m.ID, m.Name)
		return err
	})
}

// cmdDelete is `rollcall delete ID|NAME`.
func cmdDelete(args []string, s streams) error {
	fs := newFlags("delete", "rollcall delete ID|NAME")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, machinePath(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "deleted %s\n", fs.Arg(0))
	return nil
}
