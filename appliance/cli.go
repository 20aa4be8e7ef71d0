package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/apiclient"
	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

const usage = `rollcall: bare-metal commissioning appliance

Node:
  rollcall serve [-data DIR] [-name NAME] [-http ADDR] [-https ADDR] [-tftp ADDR] [-raft ADDR]
                 [-raft-advertise ADDR] [-join CODE] [-config FILE]
  rollcall keygen                      print a fresh random token

Cluster:
  rollcall cluster join-code [-ttl 60m]  print a one-time code for a new node
  rollcall cluster status [-json]        members, voters, leader, applied index, last contact
  rollcall cluster remove NAME           remove a node from the cluster
  rollcall cluster check                 every node hashes its store at one index and compares
  rollcall cluster repair NAME           rebuild a damaged node's store from the leader's

Machines:
  rollcall list [-state S] [-q TEXT] [-json] [-watch]
  rollcall show ID|NAME [-json]
  rollcall events ID|NAME [-json]
  rollcall recommission ID|NAME [-now]
  rollcall power ID status|on|off|soft|cycle|reset
  rollcall bootdev ID pxe|disk|cdrom|bios|none [-persistent] [-uefi]
  rollcall bmc ID -driver D -address A -user U -password - [-set k=v] [-verify] [-probe]
  rollcall bmc drivers
  rollcall add [-name NAME] [-mac MAC]
  rollcall boot-token MAC [-ttl 6h] [-json]   the agent token a boot script hands that MAC
  rollcall delete ID|NAME

Network (fabric → VLAN → subnet → ranges, addresses):
  rollcall fabric add NAME [-kind ethernet|infiniband] | list | show NAME | rm NAME
  rollcall vlan add FABRIC VID [-dhcp|-proxy-dhcp] [-node NAME -iface IF] [-mtu N] | list | show FABRIC VID | rm FABRIC VID
  rollcall subnet add CIDR -fabric F -vid V -purpose P [-gateway G] [-dns D,D] [-domain D] | list | show CIDR | rm CIDR [-force]
  rollcall range add CIDR dynamic|reserved|static FIRST LAST | list [-subnet CIDR] | rm FIRST
  rollcall ip list [-subnet CIDR] | reserve ADDR -name N | release ADDR
  (every list and show takes -json)

Boot images:
  rollcall image import NAME -kernel F -initrd F [-squashfs F]   upload to one node; the others fetch and verify
  rollcall image list [-json] | rm NAME

Export:
  rollcall export postgres -dsn URL [-schema rollcall] [-data DIR]   copy the store into PostgreSQL
  rollcall export status                                             the continuous mirror's position and lag

Console:
  rollcall [tui] [-data DIR]             full-screen console (a bare rollcall in a terminal)
  rollcall tui -dump 140x40 [-page P] [-plain]   render one screen to stdout
  rollcall setup [-data DIR]             first-boot setup on the appliance's screen, then the console

Client commands reach the API at $ROLLCALL_URL with $ROLLCALL_TOKEN; on a node
they read both from the data directory ($ROLLCALL_DATA or ./var, or -data DIR).
An https:// URL is checked against the cluster CA: $ROLLCALL_CA (a PEM file), or
the data directory's tls/ca.pem on a node.
`

// Main runs the rollcall command line and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if out, ok := stdout.(*os.File); ok && len(args) == 0 && console.Interactive(os.Stdin, out) {
		args = []string{"tui"} // a bare rollcall in a terminal opens the console
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve", "tui", "setup": // the console draws its own screen
	default:
		stdout = &printableWriter{w: stdout}
	}
	var err error
	switch cmd {
	case "serve":
		err = cmdServe(rest, stderr)
	case "tui":
		err = cmdTUI(rest, stdout)
	case "setup":
		err = cmdSetup(rest, stderr)
	case "keygen":
		var tok string
		if tok, err = pki.NewToken(); err == nil {
			fmt.Fprintln(stdout, tok)
		}
	case "cluster":
		err = cmdCluster(rest, stdout)
	case "list":
		err = cmdList(rest, stdout)
	case "show":
		err = cmdShow(rest, stdout)
	case "add":
		err = cmdAdd(rest, stdout)
	case "delete":
		err = cmdDelete(rest, stdout)
	case "events":
		err = cmdEvents(rest, stdout)
	case "image":
		err = cmdImage(rest, stdout)
	case "power":
		err = cmdPower(rest, stdout)
	case "bootdev":
		err = cmdBootdev(rest, stdout)
	case "bmc":
		err = cmdBMC(rest, stdinReader, stdout)
	case "export":
		err = cmdExport(rest, stdout, stderr)
	case "fabric", "vlan", "subnet", "range", "ip":
		err = cmdNetwork(cmd, rest, stdout)
	case "recommission":
		err = cmdRecommission(rest, stdout)
	case "boot-token":
		err = cmdBootToken(rest, stdout)
	default:
		fmt.Fprintf(stderr, "rollcall: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "rollcall %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

func cmdServe(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.DataDir, "data", "var", "data directory")
	fs.StringVar(&o.Name, "name", "", "node name (default: the host name)")
	fs.StringVar(&o.HTTPAddr, "http", "127.0.0.1:8080", "API and web UI listen address")
	fs.StringVar(&o.RaftAddr, "raft", "127.0.0.1:8300", "cluster port (Raft and node calls, mutual TLS)")
	fs.StringVar(&o.RaftAdvertise, "raft-advertise", "", "cluster address other nodes dial (default: -raft)")
	fs.StringVar(&o.Join, "join", "", "join code from `rollcall cluster join-code` (first start only)")
	fs.StringVar(&o.TFTPAddr, "tftp", "", "TFTP listen address for the boot loaders, e.g. :69, or off (default: port 69 on each interface this node serves DHCP on)")
	fs.StringVar(&o.HTTPSAddr, "https", "", "HTTPS API listen address, with a certificate from the cluster CA (off when empty)")
	fs.StringVar(&o.ConfigFile, "config", "", "configuration file (default DATA/rollcall.json when present)")
	fs.BoolVar(&o.RedfishDetect, "bmc-detect", true, "after commissioning, ask IPMI BMCs whether they speak Redfish")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %q is not one of debug, info, warn, error", *logLevel)
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	LowerBackground()
	TuneRuntime()
	stopProfiles, err := startProfiles()
	if err != nil {
		return err
	}
	defer stopProfiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := Start(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "\nRollcall node %s is up: http://%s\n", n.Name(), n.HTTPAddr())
	if _, err := os.Stat(filepath.Join(o.DataDir, fileAdmin)); err == nil {
		fmt.Fprintf(stderr, "admin token: %s (Authorization: Bearer <token>)\n", filepath.Join(o.DataDir, fileAdmin))
	}
	fmt.Fprintln(stderr)
	<-ctx.Done()
	o.Logger.Info("shutting down")
	return n.Close()
}

// startProfiles starts what ROLLCALL_CPUPROFILE=FILE (a CPU profile, for go
// tool pprof) and ROLLCALL_TRACE=FILE (an execution trace, for go tool
// trace) ask for, over the node's whole run: benchmarks of real processes
// (lab/bench/dhcp) use them. The returned function stops and closes them.
func startProfiles() (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, p := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{
		{"ROLLCALL_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"ROLLCALL_TRACE", trace.Start, trace.Stop},
	} {
		path := os.Getenv(p.env)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err == nil {
			if err = p.start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("%s: %w", p.env, err)
		}
		stops = append(stops, func() { p.stop(); f.Close() })
	}
	return stopAll, nil
}

// client talks to the API as the CLI.
// client is the CLI's API client: apiclient with the CLI's way of finding
// the URL, token and CA.
type client struct {
	base, token string
	api         *apiclient.Client
}

func newClient(fs *flag.FlagSet, args []string) (*client, error) {
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "node data directory (used when ROLLCALL_URL/ROLLCALL_TOKEN are unset)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c := &client{base: os.Getenv("ROLLCALL_URL"), token: os.Getenv("ROLLCALL_TOKEN")}
	var savedCA string
	if _, err := os.Stat(filepath.Join(*data, fileNodeInfo)); err != nil && (c.base == "" || c.token == "") {
		// not on a node: what the console saved in ~/.config/rollcall/client.json
		if path, err := console.DefaultConfigPath(); err == nil {
			if cfg, err := console.LoadClientConfig(path); err == nil {
				if c.base == "" {
					c.base, savedCA = cfg.URL, cfg.CAFile
				}
				if c.token == "" {
					c.token = cfg.Token
				}
			}
		}
	}
	if c.base == "" {
		var info NodeInfo
		b, err := os.ReadFile(filepath.Join(*data, fileNodeInfo))
		if err != nil || json.Unmarshal(b, &info) != nil || info.HTTPAddr == "" {
			return nil, fmt.Errorf("no API to talk to: set ROLLCALL_URL, or run on a node (no %s)", filepath.Join(*data, fileNodeInfo))
		}
		c.base = "http://" + info.HTTPAddr
	}
	if c.token == "" {
		b, err := os.ReadFile(filepath.Join(*data, fileAdmin))
		if err != nil {
			return nil, errors.New("no admin token: set ROLLCALL_TOKEN, or run on the node that holds " + filepath.Join(*data, fileAdmin))
		}
		c.token = strings.TrimSpace(string(b))
	}
	c.base = strings.TrimRight(c.base, "/")
	caFile := ""
	if strings.HasPrefix(c.base, "https://") {
		caFile = os.Getenv("ROLLCALL_CA")
		if caFile == "" {
			caFile = savedCA
		}
		if caFile == "" {
			caFile = filepath.Join(*data, dirTLS, fileCA)
		}
		if _, err := os.Stat(caFile); err != nil {
			return nil, fmt.Errorf("an https URL needs the cluster CA: set ROLLCALL_CA to its PEM file (%v)", err)
		}
	}
	api, err := apiclient.New(c.base, c.token, caFile)
	if err != nil {
		return nil, err
	}
	api.HTTP.Timeout = 10 * time.Minute
	c.api = api
	return c, nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// do calls the API; a non-2xx answer becomes an error carrying the API's
// message.
func (c *client) do(method, path string, in, out any) error {
	return c.api.Do(context.Background(), method, path, in, out)
}

// show GETs path and prints the answer: as indented JSON with -json, else
// decoded into T and printed for people.
func show[T any](c *client, path string, asJSON bool, stdout io.Writer, print func(io.Writer, T)) error {
	return exchange(c, http.MethodGet, path, nil, asJSON, stdout, func(w io.Writer, v T) error { print(w, v); return nil })
}

// exchange is show for any method and request body.
func exchange[T any](c *client, method, path string, in any, asJSON bool, stdout io.Writer, print func(io.Writer, T) error) error {
	var raw json.RawMessage
	if err := c.do(method, path, in, &raw); err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, raw)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return print(stdout, v)
}

func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func cmdCluster(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall cluster join-code|status|remove|repair|check")
	}
	fs := flag.NewFlagSet("cluster "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "join-code":
		ttl := fs.Duration("ttl", 60*time.Minute, "how long the code stays valid")
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		var v wire.JoinCodeView
		if err := c.do(http.MethodPost, "/api/v1/cluster/join-codes", wire.JoinCodeRequest{TTL: ttl.String()}, &v); err != nil {
			return err
		}
		fmt.Fprintln(stdout, v.Code)
		return nil
	case "status":
		asJSON := fs.Bool("json", false, "print JSON")
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		return exchange(c, http.MethodGet, "/api/v1/cluster", nil, *asJSON, stdout, printClusterStatus)
	case "remove":
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: rollcall cluster remove NAME")
		}
		if err := c.do(http.MethodDelete, "/api/v1/cluster/members/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s\n", fs.Arg(0))
		return nil
	case "repair":
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: rollcall cluster repair NAME")
		}
		fmt.Fprintf(stdout, "rebuilding %s's store from the leader's…\n", fs.Arg(0))
		var r wire.Repaired
		if err := c.do(http.MethodPost, "/api/v1/cluster/members/"+url.PathEscape(fs.Arg(0))+"/repair", nil, &r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "repaired %s: its store is the leader's as of index %d\n", fs.Arg(0), r.AppliedIndex)
		return nil
	case "check":
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		var r wire.CheckReply
		if err := c.do(http.MethodPost, "/api/v1/cluster/check", nil, &r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "every node hashes its store at index %d and compares; rollcall cluster status shows a node that differs\n", r.Index)
		return nil
	}
	return fmt.Errorf("unknown cluster command %q (join-code, status, remove, repair, check)", args[0])
}

func printClusterStatus(w io.Writer, v wire.ClusterView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tADDRESS\tROLE\tVOTER\tSTATE\tAPPLIED\tLAST CONTACT")
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	for _, m := range v.Members {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		voter := "no"
		if m.Voter {
			voter = "yes"
		}
		state, applied, contact := "unreachable", "-", "-"
		if m.Status != nil {
			state, applied = strings.ToLower(m.Status.State), fmt.Sprint(m.Status.Applied)
			if m.Leader {
				contact = "-"
			} else if !m.Status.LastContact.IsZero() {
				contact = time.Since(m.Status.LastContact).Round(time.Millisecond).String() + " ago"
			}
		}
		if m.Status != nil && m.Status.Diverged != "" {
			state = "damaged"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Address, role, voter, state, applied, contact)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range v.Members {
		if m.Status == nil {
			continue
		}
		if m.Status.Diverged != "" {
			fmt.Fprintf(w, "%s: %s\n", m.ID, m.Status.Diverged)
		}
		for _, p := range m.Status.Parts {
			if p.State == "failed" {
				fmt.Fprintf(w, "%s: %s failed since %s (%d restarts): %s\n", m.ID, p.Name, p.Since.Format(time.RFC3339), p.Restarts, p.Error)
			}
		}
	}
	if v.Leader == "" {
		fmt.Fprintln(w, "\nno leader: writes fail until a majority of voters is up")
	}
	return nil
}

func cmdList(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	state := fs.String("state", "", "only machines in this state")
	q := fs.String("q", "", "match name, serial, MAC or IP")
	asJSON := fs.Bool("json", false, "print JSON")
	watch := fs.Bool("watch", false, "print again on every change")
	c, err := newClient(fs, args)
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
		if *watch && index > 0 {
			v.Set("index", fmt.Sprint(index))
			v.Set("wait", "5m")
		}
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
				fmt.Fprintf(stdout, "\n-- %s, index %d --\n", time.Now().Format(time.TimeOnly), list.Index)
			}
			if *asJSON {
				if err := printJSON(stdout, raw); err != nil {
					return err
				}
			} else {
				printMachines(stdout, list.Machines)
			}
		}
		if !*watch {
			return nil
		}
		index = list.Index
	}
}

func printMachines(w io.Writer, ms []wire.MachineView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tSERIAL\tBOOT MAC\tPRODUCT\tCPU\tMEMORY\tDISKS\tGPUS\tBMC\tUPDATED")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, dash(m.Name), m.State, dash(m.Serial), dash(m.BootMAC),
			dash(product), cpu, mem, disks, gpus, bmc, m.UpdatedAt.Local().Format("2006-01-02 15:04"))
	}
	tw.Flush()
}

func humanBytes(b int64) string {
	const unit = 1000
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(b)/float64(div), "kMGTPE"[exp])
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneArg(fs *flag.FlagSet, usage string) (string, error) {
	if fs.NArg() != 1 {
		return "", errors.New("usage: " + usage)
	}
	return fs.Arg(0), nil
}

func cmdShow(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	args = flagsFirst(args)
	c, err := newClient(fs, args)
	if err != nil {
		return err
	}
	ref, err := oneArg(fs, "rollcall show ID|NAME [-json]")
	if err != nil {
		return err
	}
	return show(c, "/api/v1/machines/"+url.PathEscape(ref), *asJSON, stdout, printDetail)
}

func printDetail(w io.Writer, d wire.MachineDetail) {
	m, s := d.MachineView, d.Summary
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
	rows = append(rows, [2]string{"Created", m.CreatedAt.Local().Format(time.RFC3339)}, [2]string{"Updated", m.UpdatedAt.Local().Format(time.RFC3339)})
	if !m.Commissioned.IsZero() {
		rows = append(rows, [2]string{"Commissioned", m.Commissioned.Local().Format(time.RFC3339)})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	tw.Flush()
	if len(d.Events) > 0 {
		fmt.Fprintln(w, "\nEvents:")
		printEvents(w, d.Events)
	}
}

func printEvents(w io.Writer, events []wire.Event) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05"), e.Kind, e.Message)
	}
	tw.Flush()
}

func cmdEvents(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := newClient(fs, flagsFirst(args))
	if err != nil {
		return err
	}
	ref, err := oneArg(fs, "rollcall events ID|NAME [-json]")
	if err != nil {
		return err
	}
	return show(c, "/api/v1/machines/"+url.PathEscape(ref)+"/events", *asJSON, stdout, func(w io.Writer, v wire.EventList) { printEvents(w, v.Events) })
}

func cmdRecommission(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("recommission", flag.ContinueOnError)
	now := fs.Bool("now", false, "power-cycle into the commissioning image at once through the BMC")
	c, err := newClient(fs, flagsFirst(args))
	if err != nil {
		return err
	}
	ref, err := oneArg(fs, "rollcall recommission ID|NAME [-now]")
	if err != nil {
		return err
	}
	path := "/api/v1/machines/" + url.PathEscape(ref) + "/recommission"
	if *now {
		path += "?now=1"
	}
	if *now {
		var j wire.Job
		if err := c.do(http.MethodPost, path, nil, &j); err != nil {
			return err
		}
		return printJob(stdout, j)
	}
	var m wire.MachineView
	if err := c.do(http.MethodPost, path, nil, &m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s (commissions again on its next network boot)\n", m.ID, m.State)
	return nil
}

func cmdAdd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("add", flag.ContinueOnError)
	name := fs.String("name", "", "machine name (a DNS label)")
	mac := fs.String("mac", "", "boot MAC address")
	c, err := newClient(fs, args)
	if err != nil {
		return err
	}
	var m wire.MachineView
	if err := c.do(http.MethodPost, "/api/v1/machines", wire.CreateMachineRequest{Name: *name, MAC: *mac}, &m); err != nil {
		return err
	}
	fmt.Fprintln(stdout, m.ID)
	return nil
}

func cmdDelete(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	c, err := newClient(fs, flagsFirst(args))
	if err != nil {
		return err
	}
	ref, err := oneArg(fs, "rollcall delete ID|NAME")
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, "/api/v1/machines/"+url.PathEscape(ref), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted %s\n", ref)
	return nil
}

// flagsFirst lets `show ID -json` work as well as `show -json ID`: Go's flag
// package stops at the first non-flag argument.
func flagsFirst(args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			if a == "-data" && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		rest = append(rest, a)
	}
	return append(flags, rest...)
}

func cmdTUI(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tui", flag.ContinueOnError)
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "node data directory (its node.json and admin.token, when ROLLCALL_URL/ROLLCALL_TOKEN are unset)")
	dump := fs.String("dump", "", "render one screen, WIDTHxHEIGHT such as 140x40, to stdout and exit")
	page := fs.String("page", "overview", "the page for -dump: "+strings.Join(console.PageNames(), ", "))
	plain := fs.Bool("plain", false, "with -dump: no colour")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := consoleOptions(*data)
	if *dump != "" {
		var w, h int
		if n, err := fmt.Sscanf(*dump, "%dx%d", &w, &h); err != nil || n != 2 {
			return fmt.Errorf("-dump %q: want WIDTHxHEIGHT such as 140x40", *dump)
		}
		cl, err := o.Client()
		if err != nil {
			return err
		}
		return console.Dump(stdout, w, h, *page, *plain, cl)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return console.Run(ctx, o)
}

// consoleOptions finds the API as the CLI does: $ROLLCALL_URL, $ROLLCALL_TOKEN
// and $ROLLCALL_CA, else the node's data directory; the console takes what
// is still missing from ~/.config/rollcall/client.json, or asks.
func consoleOptions(data string) console.Options {
	o := console.Options{URL: os.Getenv("ROLLCALL_URL"), Token: os.Getenv("ROLLCALL_TOKEN"), CAFile: os.Getenv("ROLLCALL_CA")}
	if o.URL == "" {
		var info NodeInfo
		if b, err := os.ReadFile(filepath.Join(data, fileNodeInfo)); err == nil && json.Unmarshal(b, &info) == nil && info.HTTPAddr != "" {
			o.URL = "http://" + info.HTTPAddr
		}
	}
	if o.Token == "" && o.URL != "" {
		if b, err := os.ReadFile(filepath.Join(data, fileAdmin)); err == nil {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	if o.CAFile == "" && strings.HasPrefix(o.URL, "https://") {
		o.CAFile = filepath.Join(data, dirTLS, fileCA)
	}
	return o
}

// cmdSetup is the appliance's first boot on its own screen: the setup, then
// the node it starts keeps running and the screen becomes the console.
func cmdSetup(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "data directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !console.NeedsSetup(*data) {
		return fmt.Errorf("%s already holds a node: start it with rollcall serve -data %s", *data, *data)
	}
	if err := os.MkdirAll(*data, 0o750); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(*data, "rollcall.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	defer logf.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var n *Node
	_, err = console.Setup(ctx, console.SetupOptions{DataDir: *data, CheckName: store.ValidName, Start: func(ctx context.Context, ch console.SetupChoices) (string, error) {
		host := ch.Address.Addr().String()
		var err error
		n, err = Start(ctx, Options{
			DataDir: *data, Name: ch.Name, Join: ch.Join, RedfishDetect: true,
			HTTPAddr: net.JoinHostPort(host, "8080"), RaftAddr: net.JoinHostPort(host, "8300"),
			Logger: slog.New(slog.NewTextHandler(logf, nil)), // the screen is the setup's
		})
		if err != nil {
			return "", err
		}
		return "http://" + n.HTTPAddr() + "/", nil
	}})
	if err != nil {
		return err
	}
	defer n.Close()
	return console.Run(ctx, consoleOptions(*data))
}
