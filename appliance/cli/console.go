package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/node"
	"github.com/rollcall/rollcall/store"
)

// cmdTUI is `rollcall tui`: the full-screen console, or one screen of it
// rendered to stdout with -dump.
func cmdTUI(args []string, s streams) error {
	fs := flag.NewFlagSet("tui", flag.ContinueOnError)
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "node data directory (its node.json and admin.token, when ROLLCALL_URL/ROLLCALL_TOKEN are unset)")
	dump := fs.String("dump", "", "render one screen, WIDTHxHEIGHT such as 140x40, to stdout and exit")
	page := fs.String("page", "overview", "the page for -dump: "+strings.Join(console.PageNames(), ", "))
	plain := fs.Bool("plain", false, "with -dump: no colour")
	if err := parseFlags(fs, args); err != nil {
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
		return console.Dump(s.stdout, w, h, *page, *plain, cl)
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
		o.URL, _ = nodeURL(data)
	}
	if o.Token == "" && o.URL != "" {
		if tok, err := nodeToken(data); err == nil {
			o.Token = tok
		}
	}
	if o.CAFile == "" && strings.HasPrefix(o.URL, "https://") {
		o.CAFile = node.CAFile(data)
	}
	return o
}

// cmdSetup is the appliance's first boot on its own screen: the setup, then
// the node it starts keeps running and the screen becomes the console.
func cmdSetup(args []string, s streams) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "data directory")
	if err := parseFlags(fs, args); err != nil {
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
	var n *node.Node
	_, err = console.Setup(ctx, console.SetupOptions{DataDir: *data, CheckName: store.ValidName, Start: func(ctx context.Context, ch console.SetupChoices) (string, error) {
		host := ch.Address.Addr().String()
		var err error
		n, err = node.Start(ctx, node.Options{
			DataDir: *data, Name: ch.Name, Join: ch.Join, RedfishDetect: true, OSSyncTimer: true,
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
