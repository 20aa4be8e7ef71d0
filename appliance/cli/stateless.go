package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// Stateless nodes: profiles, overlays, assignments, renders, the nodes and
// the cluster's variables (the reference's "Stateless nodes
// (Warewulf-style)"). assign and unassign take tag:NAME like every bulk
// verb (eachMachine).

const (
	profileUsage = "rollcall profile add NAME -image IMG [-overlays a,b] [-args ARGS] [-name-format node%03d] [-first N] [-last N] [-subnets CIDR,…] [-var K=V]… | set NAME [the same flags: only those given change] | rm NAME | list [-json] | show NAME [-json]"
	overlayUsage = "rollcall overlay import NAME DIR | import NAME -example | list [-json] | show NAME [-files] [-json] | rm NAME | export NAME DIR [-force]"
)

func profilePath(name string) string { return "/api/v1/profiles/" + url.PathEscape(name) }
func overlayPath(name string) string { return "/api/v1/overlays/" + url.PathEscape(name) }

func cmdProfile(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + profileUsage)
	}
	verbs := map[string]func([]string, io.Writer) error{
		"add":  func(a []string, w io.Writer) error { return profileSave(a, w, false) },
		"set":  func(a []string, w io.Writer) error { return profileSave(a, w, true) },
		"rm":   profileRm,
		"list": profileList.run,
		"show": profileShow.run,
	}
	h, ok := verbs[args[0]]
	if !ok {
		return fmt.Errorf("unknown profile command %q; usage: %s", args[0], profileUsage)
	}
	return h(args[1:], s.stdout)
}

func profileSave(args []string, stdout io.Writer, replace bool) error {
	verb, method := "add", http.MethodPost
	if replace {
		verb, method = "set", http.MethodPut
	}
	fs := newFlags("profile "+verb, "rollcall profile "+verb+" NAME -image IMG [-overlays a,b] [-args ARGS] [-name-format F] [-first N] [-last N] [-subnets CIDR,…] [-var K=V]… [-unset-var K]…")
	image := fs.String("image", "", "the boot image (kernel, initrd, squashfs: rollcall image import)")
	overlays := fs.String("overlays", "", "overlays applied in order, comma-separated (\"\" for none)")
	kargs := fs.String("args", "", "extra kernel arguments")
	format := fs.String("name-format", "", "node name format (default node%03d)")
	first := fs.Int("first", 0, "first node number (default 1)")
	last := fs.Int("last", 0, "last node number (default 999)")
	subnets := fs.String("subnets", "", "IPAM subnets the nodes' addresses come from, comma-separated")
	vars := keyValues{}
	fs.Var(vars, "var", "a template variable K=V (repeatable)")
	var unset listFlag
	fs.Var(&unset, "unset-var", "remove a template variable (set; repeatable)")
	asJSON := fs.Bool("json", false, "print the profile as JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	name := fs.Arg(0)
	var req wire.ProfileRequest
	if replace {
		// set: the profile as it is, with the flags given.
		var p wire.Profile
		if err := c.do(http.MethodGet, profilePath(name), nil, &p); err != nil {
			return err
		}
		req = wire.ProfileRequest{Image: p.Image, Overlays: p.Overlays, Args: p.Args, NameFormat: p.NameFormat,
			NameFirst: p.NameFirst, NameLast: p.NameLast, Subnets: p.Subnets, Vars: p.Vars}
	} else if *image == "" {
		return errors.New("give -image: the boot image the profile's nodes boot")
	}
	if given["image"] {
		req.Image = *image
	}
	if given["overlays"] {
		req.Overlays = splitList(*overlays)
	}
	if given["args"] {
		req.Args = *kargs
	}
	if given["name-format"] {
		req.NameFormat = *format
	}
	if given["first"] {
		req.NameFirst = *first
	}
	if given["last"] {
		req.NameLast = *last
	}
	if given["subnets"] {
		req.Subnets = splitList(*subnets)
	}
	if len(vars) > 0 || len(unset) > 0 {
		if req.Vars == nil {
			req.Vars = map[string]string{}
		}
		for k, v := range vars {
			req.Vars[k] = v
		}
		for _, k := range unset {
			delete(req.Vars, k)
		}
	}
	return fetch(c, method, profilePath(name), req, *asJSON, stdout, func(w io.Writer, p wire.Profile) error {
		done := "added"
		if replace {
			done = "changed"
		}
		_, err := fmt.Fprintf(w, "profile %s %s: image %s, overlays %s, names %s (%d–%d)\n", p.Name, done, p.Image, dash(strings.Join(p.Overlays, ",")), p.NameFormat, p.NameFirst, p.NameLast)
		return err
	})
}

func profileRm(args []string, stdout io.Writer) error {
	return removeNamed(args, stdout, "profile", profilePath)
}

// removeNamed is `profile rm NAME` and `overlay rm NAME`: a DELETE that
// answers wire.Deleted (printed with -json).
func removeNamed(args []string, stdout io.Writer, noun string, path func(string) string) error {
	fs := newFlags(noun+" rm", "rollcall "+noun+" rm NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodDelete, path(fs.Arg(0)), nil, *asJSON, stdout, func(w io.Writer, d wire.Deleted) error {
		_, err := fmt.Fprintf(w, "%s %s removed\n", noun, d.Deleted)
		return err
	})
}

var (
	profileList = reader[wire.ProfileList]{name: "profile list", usage: "rollcall profile list [-json]", path: at("/api/v1/profiles"),
		table: func(w io.Writer, l wire.ProfileList) error {
			tw := newTable(w)
			fmt.Fprintln(tw, "NAME\tIMAGE\tOVERLAYS\tNAMES\tSUBNETS\tNODES")
			for _, p := range l.Profiles {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s %d–%d\t%s\t%d\n", p.Name, p.Image, dash(strings.Join(p.Overlays, ",")), p.NameFormat, p.NameFirst, p.NameLast,
					dash(strings.Join(p.Subnets, ",")), p.Nodes)
			}
			return tw.Flush()
		}}
	profileShow = reader[wire.Profile]{name: "profile show", usage: "rollcall profile show NAME [-json]", nargs: 1,
		path: func(a []string) (string, error) { return profilePath(a[0]), nil },
		table: func(w io.Writer, p wire.Profile) error {
			tw := newTable(w)
			fmt.Fprintf(tw, "name:\t%s\nimage:\t%s\noverlays:\t%s\nkernel args:\t%s\nnode names:\t%s (%d–%d)\nsubnets:\t%s\nnodes:\t%d\ncreated:\t%s\n",
				p.Name, p.Image, dash(strings.Join(p.Overlays, ", ")), dash(p.Args), p.NameFormat, p.NameFirst, p.NameLast,
				dash(strings.Join(p.Subnets, ", ")), p.Nodes, stamp(p.Created))
			keys := slices.Sorted(mapsKeys(p.Vars))
			for _, k := range keys {
				fmt.Fprintf(tw, "var %s:\t%s\n", k, clipLine(p.Vars[k]))
			}
			return tw.Flush()
		}}
)

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// clipLine shows a variable's first line, clipped.
func clipLine(s string) string {
	line, _, more := strings.Cut(s, "\n")
	if len(line) > 80 {
		line, more = line[:80], true
	}
	if more {
		line += " …"
	}
	return line
}

// ---- assign, unassign

func cmdAssign(args []string, s streams) error {
	fs := newFlags("assign", "rollcall assign ID|tag:NAME PROFILE [-boot] [-json]")
	boot := fs.Bool("boot", false, "power-cycle each machine through its BMC once it is assigned")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	req := wire.AssignRequest{Profile: fs.Arg(1), Boot: *boot}
	return c.eachMachine(fs.Arg(0), *asJSON, s.stdout, func(id string) outcome {
		return call(c, http.MethodPost, "/api/v1/machines/"+url.PathEscape(id)+"/assign", req, func(r wire.AssignResult) string {
			line := fmt.Sprintf("%s: node %s of profile %s", r.Node.Machine, r.Node.Name, r.Node.Profile)
			if len(r.Node.Addresses) > 0 {
				line += " (" + strings.Join(r.Node.Addresses, ", ") + ")"
			}
			switch {
			case r.PowerError != "":
				line += "; not power-cycled: " + r.PowerError
			case r.PowerJob != "":
				line += "; power cycle queued (job " + r.PowerJob + ")"
			}
			return line
		})
	})
}

func cmdUnassign(args []string, s streams) error {
	fs := newFlags("unassign", "rollcall unassign ID|tag:NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return c.eachMachine(fs.Arg(0), *asJSON, s.stdout, func(id string) outcome {
		return call(c, http.MethodPost, "/api/v1/machines/"+url.PathEscape(id)+"/unassign", nil, func(n wire.StatelessNode) string {
			return fmt.Sprintf("%s: node %s unassigned, %d addresses freed", n.Machine, n.Name, len(n.Addresses))
		})
	})
}

// ---- overlays

func cmdOverlay(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + overlayUsage)
	}
	verbs := map[string]func([]string, io.Writer) error{
		"import": overlayImport,
		"list":   overlayList.run,
		"show":   overlayShow,
		"rm":     overlayRm,
		"export": overlayExport,
	}
	h, ok := verbs[args[0]]
	if !ok {
		return fmt.Errorf("unknown overlay command %q; usage: %s", args[0], overlayUsage)
	}
	return h(args[1:], s.stdout)
}

func overlayImport(args []string, stdout io.Writer) error {
	fs := newFlags("overlay import", "rollcall overlay import NAME DIR | NAME -example")
	example := fs.Bool("example", false, "import the example overlay of that name ("+strings.Join(overlay.Examples(), ", ")+")")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, anyArgs)
	if err != nil {
		return err
	}
	var files []store.OverlayFile
	switch {
	case *example && fs.NArg() == 1:
		if files, err = overlay.Example(fs.Arg(0)); err != nil {
			return errors.New(store.Public(err))
		}
	case !*example && fs.NArg() == 2:
		if files, err = ReadOverlayDir(fs.Arg(1)); err != nil {
			return err
		}
	default:
		return errors.New("usage: " + fs.usage)
	}
	var req wire.OverlayRequest
	for _, f := range files {
		req.Files = append(req.Files, wire.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content})
	}
	return fetch(c, http.MethodPut, overlayPath(fs.Arg(0)), req, *asJSON, stdout, func(w io.Writer, o wire.Overlay) error {
		_, err := fmt.Fprintf(w, "overlay %s imported: %d files (%d templates), %s\n", o.Name, o.FileCount, o.Templates, humanBytes(o.Size))
		return err
	})
}

// ReadOverlayDir reads an overlay's tree from dir: the regular files under
// dir/system and dir/runtime (at least one of them), their permission
// bits kept (setuid, setgid and sticky too). A symbolic link, a device or
// anything but a file or a directory is refused, as are more files or
// bytes than an overlay may hold, before anything is sent. Files are read
// through an os.Root of dir, so nothing outside it is read even if the
// tree changes while it is walked.
func ReadOverlayDir(dir string) ([]store.OverlayFile, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var files []store.OverlayFile
	var total int64
	found := false
	for _, tree := range []string{store.TreeSystem, store.TreeRuntime} {
		st, err := root.Lstat(tree)
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", filepath.Join(dir, tree))
		}
		found = true
		err = iofs.WalkDir(root.FS(), tree, func(rel string, d iofs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: only regular files go into an overlay (this is a %s)", rel, kindOf(d.Type()))
			}
			if len(files) == store.MaxOverlayFiles {
				return fmt.Errorf("%s holds more than the %d files an overlay may have", dir, store.MaxOverlayFiles)
			}
			f, err := readOverlayFile(root, rel, store.MaxOverlayBytes-total)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			total += int64(len(f.Content))
			files = append(files, f)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has neither system/ nor runtime/: an overlay's files are under those", dir)
	}
	if err := store.CheckOverlayFiles(files); err != nil {
		return nil, errors.New(store.Public(err))
	}
	return files, nil
}

// errOverlayTooBig is a tree past store.MaxOverlayBytes.
var errOverlayTooBig = fmt.Errorf("the tree holds more than the %d MiB an overlay may have", store.MaxOverlayBytes>>20)

// readOverlayFile reads one file of the tree, at most budget bytes.
func readOverlayFile(root *os.Root, rel string, budget int64) (store.OverlayFile, error) {
	f, err := root.Open(rel)
	if err != nil {
		return store.OverlayFile{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return store.OverlayFile{}, err
	}
	if !info.Mode().IsRegular() {
		return store.OverlayFile{}, errors.New("only regular files go into an overlay")
	}
	if info.Size() > budget {
		return store.OverlayFile{}, errOverlayTooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, budget+1))
	if err != nil {
		return store.OverlayFile{}, err
	}
	if int64(len(b)) > budget {
		return store.OverlayFile{}, errOverlayTooBig // it grew while read
	}
	return store.OverlayFile{Path: rel, Mode: unixMode(info.Mode()), Content: b}, nil
}

// unixMode is a file's permission bits as an overlay keeps them (0o7777).
func unixMode(m iofs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&iofs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&iofs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&iofs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// fileMode is unixMode's inverse.
func fileMode(u uint32) iofs.FileMode {
	m := iofs.FileMode(u & 0o777)
	if u&0o4000 != 0 {
		m |= iofs.ModeSetuid
	}
	if u&0o2000 != 0 {
		m |= iofs.ModeSetgid
	}
	if u&0o1000 != 0 {
		m |= iofs.ModeSticky
	}
	return m
}

func kindOf(m iofs.FileMode) string {
	switch {
	case m&iofs.ModeSymlink != 0:
		return "symbolic link"
	case m&iofs.ModeDevice != 0:
		return "device"
	case m&iofs.ModeNamedPipe != 0:
		return "named pipe"
	case m&iofs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

var overlayList = reader[wire.OverlayList]{name: "overlay list", usage: "rollcall overlay list [-json]", path: at("/api/v1/overlays"),
	table: func(w io.Writer, l wire.OverlayList) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tFILES\tTEMPLATES\tSIZE\tUPDATED\tPROFILES")
		for _, o := range l.Overlays {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", o.Name, o.FileCount, o.Templates, humanBytes(o.Size), stamp(o.Updated), dash(strings.Join(o.Profiles, ",")))
		}
		return tw.Flush()
	}}

func overlayShow(args []string, stdout io.Writer) error {
	fs := newFlags("overlay show", "rollcall overlay show NAME [-files] [-json]")
	withFiles := fs.Bool("files", false, "list its files")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodGet, overlayPath(fs.Arg(0)), nil, *asJSON, stdout, func(w io.Writer, o wire.Overlay) error {
		tw := newTable(w)
		fmt.Fprintf(tw, "name:\t%s\nfiles:\t%d (%d templates)\nsize:\t%s\nsha256:\t%s\nupdated:\t%s\nprofiles:\t%s\n",
			o.Name, o.FileCount, o.Templates, humanBytes(o.Size), o.SHA256, stamp(o.Updated), dash(strings.Join(o.Profiles, ", ")))
		if *withFiles {
			fmt.Fprintln(tw, "\nMODE\tSIZE\tPATH")
			for _, f := range o.Files {
				fmt.Fprintf(tw, "%04o\t%d\t%s\n", f.Mode, f.Size, f.Path)
			}
		}
		return tw.Flush()
	})
}

func overlayRm(args []string, stdout io.Writer) error {
	return removeNamed(args, stdout, "overlay", overlayPath)
}

// overlayExport is `overlay export NAME DIR`: the overlay's files written
// back as overlay import reads them (DIR/system/…, DIR/runtime/…, their
// modes), so that export, edit and import round-trip. -json prints the
// overlay without its content.
func overlayExport(args []string, stdout io.Writer) error {
	fs := newFlags("overlay export", "rollcall overlay export NAME DIR [-force] [-json]")
	force := fs.Bool("force", false, "replace the files DIR already has (else an existing file stops the export before anything is written)")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	var o wire.Overlay
	if err := c.do(http.MethodGet, overlayPath(fs.Arg(0))+"?content=1", nil, &o); err != nil {
		return err
	}
	files := make([]store.OverlayFile, len(o.Files))
	for i, f := range o.Files {
		files[i] = store.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content}
		o.Files[i].Content = nil
	}
	if err := WriteOverlayDir(fs.Arg(1), files, *force); err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(o)
		if err != nil {
			return err
		}
		return printJSON(stdout, b)
	}
	_, err = fmt.Fprintf(stdout, "overlay %s exported to %s: %d files, %s\n", o.Name, fs.Arg(1), len(files), humanBytes(o.Size))
	return err
}

// WriteOverlayDir writes an overlay's files under dir (made if missing),
// with their modes, through an os.Root of dir so that no path and no
// symbolic link already in dir leads outside it. The paths are checked as
// the store checks them first; without force, a file dir already has
// stops it before anything is written.
func WriteOverlayDir(dir string, files []store.OverlayFile, force bool) error {
	if err := store.CheckOverlayFiles(files); err != nil {
		return errors.New(store.Public(err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	} else {
		for _, f := range files {
			if _, err := root.Lstat(f.Path); err == nil {
				return fmt.Errorf("%s already exists: give -force to replace the files %s has", filepath.Join(dir, filepath.FromSlash(f.Path)), dir)
			}
		}
	}
	for _, f := range files {
		if err := root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
			return err
		}
		out, err := root.OpenFile(f.Path, flags, 0o600)
		if err != nil {
			return err
		}
		_, err = out.Write(f.Content)
		if err == nil {
			err = out.Chmod(fileMode(f.Mode)) // exact, whatever the umask
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- render

func cmdRender(args []string, s streams) error {
	fs := newFlags("render", "rollcall render PROFILE PATH [-node NAME] [-json]")
	node := fs.String("node", "", "the node whose file to render (default: the controller's view)")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	path := profilePath(fs.Arg(0)) + "/render?path=" + url.QueryEscape(fs.Arg(1))
	if *node != "" {
		path += "&node=" + url.QueryEscape(*node)
	}
	return fetch(c, http.MethodGet, path, nil, *asJSON, s.stdout, func(w io.Writer, r wire.Render) error {
		if r.Content != "" || r.ContentBase64 == nil {
			_, err := io.WriteString(w, r.Content)
			return err
		}
		_, err := w.Write(r.ContentBase64)
		return err
	})
}

// ---- nodes

var nodesList = reader[wire.StatelessNodeList]{name: "nodes", usage: "rollcall nodes [-json]", path: at("/api/v1/stateless/nodes"),
	table: func(w io.Writer, l wire.StatelessNodeList) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tMACHINE\tPROFILE\tADDRESSES\tSTATE\tLAST SEEN")
		now := time.Now()
		for _, n := range l.Nodes {
			state := "assigned"
			switch {
			case n.Stale:
				state = "stale"
			case !n.Booted.IsZero():
				state = "booted"
			}
			seen := "-"
			if !n.LastSeen.IsZero() {
				seen = now.Sub(n.LastSeen).Truncate(time.Second).String() + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Machine, n.Profile, dash(strings.Join(n.Addresses, ",")), state, seen)
		}
		return tw.Flush()
	}}

func cmdNodes(args []string, s streams) error { return nodesList.run(args, s.stdout) }

// ---- cluster vars

const varsUsage = "rollcall cluster vars [-json] | vars set K=V… [-json] | vars rm K… [-json]"

func clusterVars(args []string, stdout io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return varsShow.run(args, stdout)
	}
	verb := args[0]
	if verb != "set" && verb != "rm" {
		return fmt.Errorf("unknown cluster vars command %q; usage: %s", verb, varsUsage)
	}
	fs := newFlags("cluster vars "+verb, varsUsage)
	asJSON := fs.Bool("json", false, "print the variables as JSON")
	c, err := fs.client(args[1:], anyArgs)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: " + varsUsage)
	}
	var cur wire.ClusterVars
	if err := c.do(http.MethodGet, "/api/v1/cluster/vars", nil, &cur); err != nil {
		return err
	}
	if cur.Vars == nil {
		cur.Vars = map[string]string{}
	}
	for _, a := range fs.Args() {
		if verb == "rm" {
			delete(cur.Vars, a)
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not K=V", a)
		}
		cur.Vars[k] = v
	}
	return fetch(c, http.MethodPut, "/api/v1/cluster/vars", wire.ClusterVars{Vars: cur.Vars}, *asJSON, stdout, func(w io.Writer, out wire.ClusterVars) error {
		_, err := fmt.Fprintf(w, "cluster vars: %d set\n", len(out.Vars))
		return err
	})
}

var varsShow = reader[wire.ClusterVars]{name: "cluster vars", usage: "rollcall cluster vars [-json]", path: at("/api/v1/cluster/vars"),
	table: func(w io.Writer, v wire.ClusterVars) error {
		tw := newTable(w)
		for _, k := range slices.Sorted(mapsKeys(v.Vars)) {
			fmt.Fprintf(tw, "%s\t%s\n", k, clipLine(v.Vars[k]))
		}
		return tw.Flush()
	}}
