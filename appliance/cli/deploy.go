package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The deployment verbs: deploy, release, jobs, job cancel (issue 18).
//
// Not done yet: tag:NAME in place of an ID (branch h-faces writes the
// expansion, machineIDs; merge it and call it here).

// cmdDeploy is `rollcall deploy ID OS [-version V] [-disk D] [-hostname H]
// [-upgrade] [-packages a,b] [-user-data FILE] [-ssh-key FILE] [-boot]
// [-watch] [-json]`.
func cmdDeploy(args []string, s streams) error {
	fs := newFlags("deploy", "rollcall deploy ID OS [-version V] [-disk D] [-hostname H] [-upgrade] [-packages a,b] [-user-data FILE] [-ssh-key FILE] [-boot] [-watch] [-json]")
	var req wire.DeployRequest
	fs.StringVar(&req.Version, "version", "", "the OS version (default: its current)")
	fs.StringVar(&req.Disk, "disk", "", "the disk: a name (sda, /dev/nvme0n1), a serial, a WWN or a by-path name (default: the smallest that fits)")
	fs.StringVar(&req.Hostname, "hostname", "", "the hostname (default: the machine's name)")
	fs.BoolVar(&req.Upgrade, "upgrade", false, "upgrade every package at first boot (cloud-init package_upgrade)")
	packages := fs.String("packages", "", "packages to install at first boot, comma-separated")
	userData := fs.String("user-data", "", "a file with your own user-data part (#cloud-config, #! script or MIME multipart)")
	var keys listFlag
	fs.Var(&keys, "ssh-key", "a file of OpenSSH public keys for root and the default user (repeatable)")
	fs.BoolVar(&req.Boot, "boot", false, "power-cycle the machine into PXE through its BMC now")
	watch := fs.Bool("watch", false, "follow the job until it ends")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	ref := fs.Arg(0)
	if strings.HasPrefix(ref, "tag:") {
		return errors.New("deploy tag:NAME is not supported yet: name one machine")
	}
	req.OS = fs.Arg(1)
	if *packages != "" {
		for _, p := range strings.Split(*packages, ",") {
			if p = strings.TrimSpace(p); p != "" {
				req.Packages = append(req.Packages, p)
			}
		}
	}
	if *userData != "" {
		b, err := readSmallFile(*userData, 64<<10)
		if err != nil {
			return fmt.Errorf("-user-data: %w", err)
		}
		req.UserData = string(b)
	}
	for _, f := range keys {
		b, err := readSmallFile(f, 256<<10)
		if err != nil {
			return fmt.Errorf("-ssh-key: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				req.SSHKeys = append(req.SSHKeys, line)
			}
		}
	}
	var j wire.DeployJob
	if err := c.do(http.MethodPost, machinePath(ref, "deploy"), req, &j); err != nil {
		return err
	}
	if *asJSON && !*watch {
		return writeJSON(s.stdout, j)
	}
	printDeployJob(s.stdout, j)
	if *watch {
		return watchJob(c, s.stdout, j)
	}
	return nil
}

// cmdRelease is `rollcall release ID [-wipe quick|full] [-boot] [-watch] [-json]`.
func cmdRelease(args []string, s streams) error {
	fs := newFlags("release", "rollcall release ID [-wipe quick|full] [-boot] [-watch] [-json]")
	var req wire.ReleaseRequest
	fs.StringVar(&req.Wipe, "wipe", "quick", "quick (signatures and partition tables) or full (every block)")
	fs.BoolVar(&req.Boot, "boot", false, "power-cycle the machine into PXE through its BMC now")
	watch := fs.Bool("watch", false, "follow the job until it ends")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if strings.HasPrefix(fs.Arg(0), "tag:") {
		return errors.New("release tag:NAME is not supported yet: name one machine")
	}
	var j wire.DeployJob
	if err := c.do(http.MethodPost, machinePath(fs.Arg(0), "release"), req, &j); err != nil {
		return err
	}
	if *asJSON && !*watch {
		return writeJSON(s.stdout, j)
	}
	printDeployJob(s.stdout, j)
	if *watch {
		return watchJob(c, s.stdout, j)
	}
	return nil
}

// cmdJobs is `rollcall jobs ID [-watch] [-json]`: a machine's deploy and
// release jobs, newest first; -watch follows the running one.
func cmdJobs(args []string, s streams) error {
	fs := newFlags("jobs", "rollcall jobs ID [-watch] [-json]")
	watch := fs.Bool("watch", false, "follow the running job until it ends")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	var v wire.JobList
	if err := c.do(http.MethodGet, machinePath(fs.Arg(0), "jobs"), nil, &v); err != nil {
		return err
	}
	if *asJSON && !*watch {
		return writeJSON(s.stdout, v.Deploy)
	}
	tw := newTable(s.stdout)
	fmt.Fprintln(tw, "JOB\tKIND\tOS\tVERSION\tSTATE\tSTEP\tDISK\tCREATED\tERROR")
	for _, j := range v.Deploy {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, dash(j.OS), dash(j.OSVersion), j.State, dash(stepOf(j)), j.Disk.Name, j.Created.Format(time.RFC3339), j.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *watch && len(v.Deploy) > 0 && (v.Deploy[0].State == "queued" || v.Deploy[0].State == "running") {
		return watchJob(c, s.stdout, v.Deploy[0])
	}
	return nil
}

// cmdJob is `rollcall job cancel ID`: ID is the job's or its machine's.
func cmdJob(args []string, s streams) error {
	fs := newFlags("job", "rollcall job cancel JOB|MACHINE [-json]")
	asJSON := fs.Bool("json", false, "print the job as JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	if fs.Arg(0) != "cancel" {
		return errors.New("usage: " + fs.usage)
	}
	machine := fs.Arg(1)
	if strings.HasPrefix(machine, "j-") {
		var j wire.DeployJob
		if err := c.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(machine), nil, &j); err != nil {
			return err
		}
		machine = j.Machine
	}
	var j wire.DeployJob
	if err := c.do(http.MethodPost, machinePath(machine, "jobs", "cancel"), nil, &j); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(s.stdout, j)
	}
	if j.Cancel {
		fmt.Fprintf(s.stdout, "%s %s: cancel asked; it had started writing, so the agent wipes the disk and fails\n", j.ID, j.Kind)
	} else {
		fmt.Fprintf(s.stdout, "%s %s: %s; %s is back to its state before\n", j.ID, j.Kind, j.State, j.Machine)
	}
	return nil
}

// printDeployJob shows what a job will do before anything is written.
func printDeployJob(w io.Writer, j wire.DeployJob) {
	switch j.Kind {
	case "deploy":
		fmt.Fprintf(w, "%s: job %s deploys %s %s onto %s\n", j.Machine, j.ID, j.OS, j.OSVersion, j.Disk.Name)
	default:
		fmt.Fprintf(w, "%s: job %s wipes %s (%s)\n", j.Machine, j.ID, j.Disk.Name, j.Wipe)
	}
	id := []string{humanBytes(j.Disk.Size)}
	if j.Disk.Serial != "" {
		id = append(id, "serial "+j.Disk.Serial)
	}
	if j.Disk.WWN != "" {
		id = append(id, "wwn "+j.Disk.WWN)
	}
	fmt.Fprintf(w, "  disk: %s (%s)\n", j.Disk.Name, strings.Join(id, ", "))
	if j.Disk.Rule != "" {
		fmt.Fprintf(w, "  rule: %s\n", j.Disk.Rule)
	}
	if j.Kind == "deploy" {
		fmt.Fprintf(w, "  hostname: %s\n", j.FQDN)
		for _, a := range j.Addresses {
			fmt.Fprintf(w, "  address: %s on %s (%s)\n", a.IP, a.Interface, a.Subnet)
		}
		if len(j.Addresses) == 0 {
			fmt.Fprintln(w, "  address: DHCP (no static range on the boot subnet)")
		}
	}
	if j.PowerJob != "" {
		fmt.Fprintf(w, "  power cycle: BMC job %s\n", j.PowerJob)
	} else if !j.Boot {
		fmt.Fprintln(w, "  starts at the machine's next network boot")
	}
}

// watchJob follows a job through blocking queries, a line per change of
// step or progress (step, percentage, MB/s), until it ends; a failed job
// is an error.
func watchJob(c *client, w io.Writer, j wire.DeployJob) error {
	var last wire.JobProgress
	for {
		if j.Progress != last && j.Progress.Step != "" {
			line := fmt.Sprintf("%s %s", j.Progress.Step, j.Progress.State)
			if j.Progress.Total > 0 {
				line += fmt.Sprintf(" %d%%", j.Progress.Bytes*100/j.Progress.Total)
			}
			if dt := j.Progress.Updated.Sub(last.Updated).Seconds(); last.Step == j.Progress.Step && dt > 0 && j.Progress.Bytes > last.Bytes {
				line += fmt.Sprintf(" %.1f MB/s", float64(j.Progress.Bytes-last.Bytes)/1e6/dt)
			}
			fmt.Fprintln(w, line)
			last = j.Progress
		}
		switch j.State {
		case "done":
			fmt.Fprintf(w, "%s: %s done\n", j.Machine, j.Kind)
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("%s %s %s: %s", j.Kind, j.ID, j.State, j.Error)
		}
		var next wire.DeployJob
		if err := c.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%s?index=%d&wait=30s", url.PathEscape(j.ID), j.Index), nil, &next); err != nil {
			return err
		}
		j = next
	}
}

func stepOf(j wire.DeployJob) string {
	if j.Progress.Step == "" {
		return ""
	}
	s := j.Progress.Step + " " + j.Progress.State
	if j.Progress.Total > 0 {
		s += fmt.Sprintf(" %d%%", j.Progress.Bytes*100/j.Progress.Total)
	}
	return s
}

// readSmallFile reads a file of at most limit bytes ("-" is stdin).
func readSmallFile(name string, limit int64) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d KiB", name, limit>>10)
	}
	return b, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
