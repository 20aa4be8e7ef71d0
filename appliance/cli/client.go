package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/apiclient"
	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/node"
)

// client is the CLI's API client: apiclient with the CLI's way of finding
// the URL, token and CA.
type client struct {
	api *apiclient.Client
}

// newClient adds -data to fs, parses args (parseFlags: flags anywhere) and
// finds the API: $ROLLCALL_URL and $ROLLCALL_TOKEN; off a node, what the
// console saved in ~/.config/rollcall/client.json; on a node, its data
// directory. An https URL is checked against $ROLLCALL_CA, the saved CA, or
// the node's.
func newClient(fs *flag.FlagSet, args []string) (*client, error) {
	data := fs.String("data", envOr("ROLLCALL_DATA", "var"), "node data directory (used when ROLLCALL_URL/ROLLCALL_TOKEN are unset)")
	consistent := fs.Bool("consistent", os.Getenv("ROLLCALL_CONSISTENT") == "1", "linearizable reads: wait for the leader's read index, so every acknowledged write is seen (or ROLLCALL_CONSISTENT=1)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	base, token := os.Getenv("ROLLCALL_URL"), os.Getenv("ROLLCALL_TOKEN")
	var savedCA, certFile, keyFile string
	if _, err := os.Stat(node.NodeInfoFile(*data)); err != nil && (base == "" || token == "") {
		// not on a node: what the console saved in ~/.config/rollcall/client.json
		if path, err := console.DefaultConfigPath(); err == nil {
			if cfg, err := console.LoadClientConfig(path); err == nil {
				if base == "" {
					base, savedCA = cfg.URL, cfg.CAFile
					if token == "" && cfg.HasCert() && strings.HasPrefix(cfg.URL, "https://") {
						certFile, keyFile = cfg.CertFile, cfg.KeyFile
					}
				}
				if token == "" && certFile == "" {
					token = cfg.Token
				}
			}
		}
	}
	if base == "" {
		var ok bool
		if base, ok = nodeURL(*data); !ok {
			return nil, fmt.Errorf("no API to talk to: set ROLLCALL_URL, or run on a node (no %s)", node.NodeInfoFile(*data))
		}
	}
	if token == "" && certFile == "" {
		var err error
		if token, err = nodeToken(*data); err != nil {
			return nil, errors.New("no admin token: set ROLLCALL_TOKEN, or run on the node that holds " + node.AdminTokenFile(*data))
		}
	}
	base = strings.TrimRight(base, "/")
	caFile := ""
	if strings.HasPrefix(base, "https://") {
		caFile = os.Getenv("ROLLCALL_CA")
		if caFile == "" {
			caFile = savedCA
		}
		if caFile == "" {
			caFile = node.CAFile(*data)
		}
		if _, err := os.Stat(caFile); err != nil {
			return nil, fmt.Errorf("an https URL needs the cluster CA: set ROLLCALL_CA to its PEM file (%v)", err)
		}
	}
	var api *apiclient.Client
	var err error
	if certFile != "" {
		api, err = apiclient.NewCert(base, caFile, certFile, keyFile)
	} else {
		api, err = apiclient.New(base, token, caFile)
	}
	if err != nil {
		return nil, err
	}
	api.HTTP.Timeout = 10 * time.Minute
	api.Consistent = *consistent
	return &client{api: api}, nil
}

// nodeURL is the API of the node whose data directory is data, from the
// node.json it writes when it starts.
func nodeURL(data string) (string, bool) {
	info, err := node.ReadNodeInfo(data)
	if err != nil || info.HTTPAddr == "" {
		return "", false
	}
	return "http://" + info.HTTPAddr, true
}

// nodeToken is the admin token in the node's data directory.
func nodeToken(data string) (string, error) {
	b, err := os.ReadFile(node.AdminTokenFile(data))
	return strings.TrimSpace(string(b)), err
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

// upload sends a raw body of known length.
func (c *client) upload(method, path string, body io.Reader, size int64, out any) error {
	return c.api.Upload(context.Background(), method, path, body, size, out)
}

// fetch calls the API and prints its answer: with -json (asJSON) the JSON
// the API sent, indented, so scripts see every field; else decoded into T
// and printed for people by table.
func fetch[T any](c *client, method, path string, in any, asJSON bool, w io.Writer, table func(io.Writer, T) error) error {
	var raw json.RawMessage
	if err := c.do(method, path, in, &raw); err != nil {
		return err
	}
	return present(raw, asJSON, w, table)
}

// present prints an answer as fetch does: the JSON indented with -json,
// else decoded into T and printed by table.
func present[T any](raw json.RawMessage, asJSON bool, w io.Writer, table func(io.Writer, T) error) error {
	if asJSON {
		return printJSON(w, raw)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return table(w, v)
}

// reader is a verb that only reads: it takes -json (and the client's
// -data), nargs positional arguments from which path makes the API path,
// and, when filter names one, a flag sent as that query parameter (-subnet
// CIDR); it prints the answer with fetch.
type reader[T any] struct {
	name, usage        string
	nargs              int
	path               func(args []string) (string, error)
	filter, filterHelp string
	table              func(io.Writer, T) error
}

func (r reader[T]) run(args []string, stdout io.Writer) error {
	fs := newFlags(r.name, r.usage)
	var filter *string
	if r.filter != "" {
		filter = fs.String(r.filter, "", r.filterHelp)
	}
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, r.nargs)
	if err != nil {
		return err
	}
	path, err := r.path(fs.Args())
	if err != nil {
		return err
	}
	if filter != nil && *filter != "" {
		path += "?" + r.filter + "=" + url.QueryEscape(*filter)
	}
	return fetch(c, http.MethodGet, path, nil, *asJSON, stdout, r.table)
}

// at is the path of a reader that takes no arguments.
func at(path string) func([]string) (string, error) {
	return func([]string) (string, error) { return path, nil }
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

// newTable is how every table of the CLI lines up its columns: two spaces
// between them, tabs expanded. Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// printRows prints label: value rows, the values lined up.
func printRows(w io.Writer, rows [][2]string) error {
	tw := newTable(w)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// dash stands for an empty value in a table.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
