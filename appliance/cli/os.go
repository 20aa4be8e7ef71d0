package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

const osUsage = "usage: rollcall os list [-json] | sync [NAME…] [-force] [-json] | import NAME FILE|URL [-family debian|rhel] [-json] | promote NAME VERSION | rm NAME VERSION"

// cmdOS is `rollcall os …`, the OS image catalog. Sync and import show
// every step's progress on stderr (download, verify, inspect, convert,
// compress, record, replicate to the other nodes) and print what they did
// on stdout.
func cmdOS(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New(osUsage)
	}
	switch args[0] {
	case "list":
		return reader[wire.OSList]{name: "os list", usage: "rollcall os list [-json]", path: at("/api/v1/os"), table: printOSList}.run(args[1:], s.stdout)
	case "sync":
		return osSync(args[1:], s)
	case "import":
		return osImport(args[1:], s)
	case "promote":
		fs := newFlags("os promote", "rollcall os promote NAME VERSION")
		c, err := fs.client(args[1:], 2)
		if err != nil {
			return err
		}
		name, version := fs.Arg(0), fs.Arg(1)
		if err := checkOSArgs(name, version); err != nil {
			return err
		}
		var o wire.OSImage
		if err := c.do(http.MethodPost, "/api/v1/os/"+url.PathEscape(name)+"/promote", wire.OSPromoteRequest{Version: version}, &o); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: current is %s\n", o.Name, o.Current)
		return nil
	case "rm":
		fs := newFlags("os rm", "rollcall os rm NAME VERSION")
		c, err := fs.client(args[1:], 2)
		if err != nil {
			return err
		}
		name, version := fs.Arg(0), fs.Arg(1)
		if err := checkOSArgs(name, version); err != nil {
			return err
		}
		if err := c.do(http.MethodDelete, "/api/v1/os/"+url.PathEscape(name)+"/"+url.PathEscape(version), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "removed %s %s\n", name, version)
		return nil
	}
	return fmt.Errorf("unknown os command %q (list, sync, import, promote, rm)", args[0])
}

func checkOSArgs(name, version string) error {
	if err := store.ValidOSName(name); err != nil {
		return errors.New(store.Public(err))
	}
	if err := store.ValidOSVersion(version); err != nil {
		return errors.New(store.Public(err))
	}
	return nil
}

func printOSList(w io.Writer, l wire.OSList) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tVERSION\tCURRENT\tTRACK\tFAMILY\tSIZE\tRAW\tNODES\tIMPORTED\tUPSTREAM")
	for _, o := range l.Images {
		track := o.Track
		if track == "" {
			track = store.TrackLatest
		}
		if len(o.Versions) == 0 {
			fmt.Fprintf(tw, "%s\t-\t\t%s\t%s\t\t\t\t\t\n", o.Name, track, o.Family)
		}
		for _, v := range o.Versions {
			cur := ""
			if v.Current {
				cur = "*"
			}
			up := v.Upstream
			if len(up) > 23 {
				up = up[:23] + "…"
			}
			if up == "" {
				up = "(import)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", o.Name, v.Version, cur, track, o.Family,
				humanBytes(v.Size), humanBytes(v.RawSize), len(v.Nodes), l.Nodes, v.Imported.Local().Format("2006-01-02 15:04"), up)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case l.Sync.Running:
		fmt.Fprintf(w, "sync: running on %s since %s\n", l.Sync.Node, l.Sync.Started.Local().Format("2006-01-02 15:04"))
	case !l.Sync.Finished.IsZero():
		fmt.Fprintf(w, "last sync: %s on %s\n", l.Sync.Finished.Local().Format("2006-01-02 15:04"), l.Sync.Node)
	}
	return nil
}

// progressPrinter writes a stream's progress on stderr, one line per
// report (the server reports each running step about once a second).
type progressPrinter struct{ w io.Writer }

func (p progressPrinter) print(pr wire.OSProgress) {
	var b strings.Builder
	if pr.Name != "" {
		b.WriteString(pr.Name + ": ")
	}
	b.WriteString(pr.Step)
	if pr.State != "" && pr.State != "running" {
		b.WriteString(" " + pr.State)
	}
	switch {
	case pr.Step == "replicate":
		fmt.Fprintf(&b, " (%d of %d nodes)", pr.Bytes, pr.Total)
	case pr.Total > 0:
		fmt.Fprintf(&b, " %s of %s (%d%%)", humanBytes(pr.Bytes), humanBytes(pr.Total), pr.Bytes*100/pr.Total)
	case pr.Bytes > 0:
		b.WriteString(" " + humanBytes(pr.Bytes))
	}
	if pr.Message != "" && pr.Step != "replicate" {
		b.WriteString(": " + pr.Message)
	}
	fmt.Fprintln(p.w, b.String())
}

// stream runs one NDJSON call: progress to stderr, and the result (or
// the error line) returned.
func stream(c *client, path string, in any, body io.Reader, size int64, s streams) (*wire.OSResult, json.RawMessage, error) {
	pp := progressPrinter{s.stderr}
	var res *wire.OSResult
	var raw json.RawMessage
	var failed error
	err := c.api.Stream(context.Background(), http.MethodPost, path, in, body, size, func(b []byte) error {
		var l wire.OSStreamLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("the server sent a line that is not JSON: %w", err)
		}
		switch {
		case l.Progress != nil:
			pp.print(*l.Progress)
		case l.Result != nil:
			res, raw = l.Result, append(json.RawMessage(nil), b...)
		case l.Error != nil:
			failed = errors.New(l.Error.Message)
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, nil, err
	case failed != nil:
		return nil, nil, failed
	case res == nil:
		return nil, nil, errors.New("the answer ended without a result: the node's log says why")
	}
	return res, raw, nil
}

func osSync(args []string, s streams) error {
	fs := newFlags("os sync", "rollcall os sync [NAME…] [-force] [-json]")
	force := fs.Bool("force", false, "download even when the vendor's checksum is unchanged")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	for _, n := range fs.Args() {
		if err := store.ValidOSName(n); err != nil {
			return errors.New(store.Public(err))
		}
	}
	res, raw, err := stream(c, "/api/v1/os/sync", wire.OSSyncRequest{Names: fs.Args(), Force: *force}, nil, 0, s)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(s.stdout, raw)
	}
	failed := 0
	for _, r := range res.Sync {
		switch r.Action {
		case "new":
			line := fmt.Sprintf("%s: new version %s", r.Name, r.Version)
			if r.Current {
				line += " (current)"
			} else {
				line += " (pinned: current unchanged; rollcall os promote " + r.Name + " " + r.Version + ")"
			}
			if len(r.Pruned) > 0 {
				line += "; pruned " + strings.Join(r.Pruned, ", ")
			}
			fmt.Fprintln(s.stdout, line)
		case "unchanged":
			fmt.Fprintf(s.stdout, "%s: unchanged (%s)\n", r.Name, r.Version)
		default:
			failed++
			fmt.Fprintf(s.stdout, "%s: failed: %s\n", r.Name, r.Message)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d failed", failed, len(res.Sync))
	}
	return nil
}

func osImport(args []string, s streams) error {
	fs := newFlags("os import", "rollcall os import NAME FILE|URL [-family debian|rhel] [-json]")
	family := fs.String("family", "", "debian or rhel: which trust anchors and SELinux relabel the deploy agent writes")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	name, src := fs.Arg(0), fs.Arg(1)
	if err := store.ValidOSName(name); err != nil {
		return errors.New(store.Public(err))
	}
	if err := store.ValidOSFamily(*family); err != nil {
		return errors.New(store.Public(err))
	}
	q := url.Values{}
	if *family != "" {
		q.Set("family", *family)
	}
	var body io.Reader
	var size int64
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		q.Set("url", src)
	} else {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", src)
		}
		q.Set("file", filepath.Base(src))
		size = st.Size()
		cr := &countingReader{r: f}
		body = cr
		stop := showUpload(s.stderr, name, cr, size)
		defer stop()
	}
	res, raw, err := stream(c, "/api/v1/os/"+url.PathEscape(name)+"/import?"+q.Encode(), nil, body, size, s)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(s.stdout, raw)
	}
	v := res.Version
	cur := ""
	if v.Current {
		cur = ", current"
	}
	fmt.Fprintf(s.stdout, "%s: version %s (%s, %s raw, %s compressed%s) on %s\n", name, v.Version, v.Format, humanBytes(v.RawSize), humanBytes(v.Size), cur, strings.Join(v.Nodes, ", "))
	return nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// showUpload prints the upload's progress every second until it is sent
// (the server reports nothing while the body arrives).
func showUpload(w io.Writer, name string, cr *countingReader, size int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	pp := progressPrinter{w}
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := cr.n.Load()
				pp.print(wire.OSProgress{Name: name, Step: "upload", Bytes: n, Total: size})
				if n >= size {
					return
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}
