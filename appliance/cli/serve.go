package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/appliance/pki"
)

// cmdServe is `rollcall serve`: it runs a node until SIGINT or SIGTERM.
func cmdServe(args []string, s streams) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	var o node.Options
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
	fs.BoolVar(&o.OSSyncTimer, "os-sync", true, "on the leader, sync os_sources every os_sync_interval (default nightly)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %q is not one of debug, info, warn, error", *logLevel)
	}
	o.Logger = slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: lvl}))
	node.LowerBackground()
	node.TuneRuntime()
	stopProfiles, err := startProfiles()
	if err != nil {
		return err
	}
	defer stopProfiles()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stderr, "\nRollcall node %s is up: http://%s\n", n.Name(), n.HTTPAddr())
	if tok := node.AdminTokenFile(o.DataDir); fileExists(tok) {
		fmt.Fprintf(s.stderr, "admin token: %s (Authorization: Bearer <token>)\n", tok)
	}
	fmt.Fprintln(s.stderr)
	<-ctx.Done()
	o.Logger.Info("shutting down")
	return n.Close()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// cmdKeygen is `rollcall keygen`: a fresh random token.
func cmdKeygen(_ []string, s streams) error {
	tok, err := pki.NewToken()
	if err == nil {
		fmt.Fprintln(s.stdout, tok)
	}
	return err
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
