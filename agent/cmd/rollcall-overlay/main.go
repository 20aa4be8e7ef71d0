// Command rollcall-overlay dresses a stateless node with its own files. It
// runs inside the image the node booted into RAM (rollcall-overlay.service
// before munge, slurmd and ssh; a timer for the refresh):
//
//	rollcall-overlay apply system    # once at boot: host key, munge key, slurm.conf, …
//	rollcall-overlay apply runtime   # what refreshes; also the node's heartbeat
//	rollcall-overlay watch           # apply runtime every refresh_seconds
//
// It reads the appliance's address, the CA pin and the node token from the
// kernel command line (rollcall.server=, rollcall.tls=, rollcall.ca=,
// rollcall.node=) or, without them there, from /run/rollcall/node.env, which
// the initrd wrote. It fetches GET /api/v1/stateless/self/overlay/TREE
// (header X-Rollcall-Node) as a tar of at most 16 MiB within 60 s, checks
// every entry (regular files and directories only, relative clean paths
// that stay below the root) before it writes any, and writes each file
// atomically (a temporary file beside it, its mode, owner root, then
// rename). Files an earlier apply wrote and the overlay no longer has are
// left alone. Any failure exits non-zero with one line saying why.
//
// It is a binary of its own, apart from the agent: it links only the node
// settings (agent/nodeenv) and the standard library.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rollcall/rollcall/agent/nodeenv"
)

const usage = `usage: rollcall-overlay [flags] apply system|runtime | watch | show
  apply TREE   fetch this node's TREE overlay and write it under -root
  watch        apply runtime every refresh_seconds (rollcall.refresh= overrides)
  show         print the settings found (the token as "set" or "missing")
flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rollcall-overlay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	cmdline := fs.String("cmdline", "/proc/cmdline", "kernel command line to read the settings from")
	env := fs.String("env", nodeenv.Path, "settings file the initrd wrote, used when the command line has no rollcall.node=")
	root := fs.String("root", "/", "directory the overlay's paths are written under")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	switch {
	case len(rest) == 2 && rest[0] == "apply" && (rest[1] == "system" || rest[1] == "runtime"):
	case len(rest) == 1 && (rest[0] == "watch" || rest[0] == "show"):
	default:
		fs.Usage()
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "rollcall-overlay: %s\n", oneLine(err))
		return 1
	}
	cfg, err := LoadConfig(*cmdline, *env)
	if err != nil {
		return fail(err)
	}
	if rest[0] == "show" {
		tok := "missing"
		if cfg.Node != "" {
			tok = "set"
		}
		fmt.Fprintf(stdout, "server=%s tls=%s ca=%s node=%s hostname=%s refresh=%d\n", cfg.Server, cfg.TLS, cfg.CA, tok, cfg.Hostname, cfg.Refresh)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &Client{Config: cfg}
	if rest[0] == "apply" {
		res, err := c.Apply(ctx, rest[1], *root)
		if err != nil {
			return fail(fmt.Errorf("apply %s: %w", rest[1], err))
		}
		fmt.Fprintf(stdout, "rollcall-overlay: applied %s: %d files, %d bytes in %s\n", rest[1], res.Files, res.Bytes, res.Took.Round(time.Millisecond))
		return 0
	}
	err = c.Watch(ctx, *root, func(res *Result, err error) {
		if err != nil {
			fmt.Fprintf(stderr, "rollcall-overlay: apply runtime: %s\n", oneLine(err))
			return
		}
		fmt.Fprintf(stdout, "rollcall-overlay: applied runtime: %d files, %d bytes in %s\n", res.Files, res.Bytes, res.Took.Round(time.Millisecond))
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(err)
	}
	return 0
}

// LoadConfig reads the settings from the command line file, or from the
// env file when the command line carries no node token.
func LoadConfig(cmdlineFile, envFile string) (nodeenv.Config, error) {
	var cfg nodeenv.Config
	if b, err := os.ReadFile(cmdlineFile); err == nil {
		if cfg, err = nodeenv.ParseCmdline(string(b)); err != nil {
			return cfg, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return cfg, err
	}
	if cfg.Node == "" {
		b, err := os.ReadFile(envFile)
		if err != nil {
			return cfg, fmt.Errorf("no rollcall.node= on the kernel command line and no settings file: %w", err)
		}
		refresh := cfg.Refresh
		if cfg, err = nodeenv.ParseEnv(b); err != nil {
			return cfg, err
		}
		if refresh > 0 {
			cfg.Refresh = refresh
		}
	}
	return cfg, cfg.CheckClient()
}

// oneLine keeps an error to a single line for the journal and the console.
func oneLine(err error) string {
	s := []rune(err.Error())
	for i, r := range s {
		if r == '\n' || r == '\r' {
			s[i] = ' '
		}
	}
	if len(s) > 400 {
		s = append(s[:400], '…')
	}
	return string(s)
}
