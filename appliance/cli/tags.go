package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The tag verbs: `tags add|set|rm|list|show` for definitions, and `tag`
// for a machine's manual tags.

const tagsUsage = "rollcall tags add NAME [-match RULE] [-cloud-config FILE] [-overlays a,b] [-layout L] [-comment C] | " +
	"set NAME [same flags: only those given change] | rm NAME | list | show NAME  (each takes -json)"

// cmdTags is `rollcall tags add|set|rm|list|show …`.
func cmdTags(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + tagsUsage)
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "add":
		return tagSave(rest, s, true)
	case "set":
		return tagSave(rest, s, false)
	case "rm":
		return tagRm(rest, s)
	case "list":
		return tagList.run(rest, s.stdout)
	case "show":
		return tagShow.run(rest, s.stdout)
	}
	return fmt.Errorf("unknown tags command %q; usage: %s", verb, tagsUsage)
}

func tagPath(name string) string { return "/api/v1/tags/" + url.PathEscape(name) }

// tagSave is `tags add` (create: POST) and `tags set` (the stored tag with
// the flags given changed: PUT).
func tagSave(args []string, s streams, create bool) error {
	name := "tags set"
	usage := "rollcall tags set NAME [-match RULE] [-cloud-config FILE] [-overlays a,b] [-layout L] [-comment C] [-json]"
	if create {
		name = "tags add"
		usage = "rollcall tags add NAME [-match RULE] [-cloud-config FILE] [-overlays a,b] [-layout L] [-comment C] [-json]"
	}
	fs := newFlags(name, usage)
	match := fs.String("match", "", "the rule: a Go template over .Node that prints true or false ('' for a manual tag)")
	cloudConfig := fs.String("cloud-config", "", "a file holding the cloud-config fragment (#cloud-config or #! script); '' clears it")
	overlays := fs.String("overlays", "", "overlays for stateless nodes, comma-separated")
	layout := fs.String("layout", "", "the interface layout of the tagged machines")
	comment := fs.String("comment", "", "what the tag is for")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	req := wire.TagRequest{Name: fs.Arg(0)}
	if !create {
		var cur wire.TagDetail
		if err := c.do(http.MethodGet, tagPath(req.Name), nil, &cur); err != nil {
			return err
		}
		req = wire.TagRequest{Name: cur.Name, Match: cur.Match, CloudConfig: cur.CloudConfig, Overlays: cur.Overlays, Layout: cur.Layout, Comment: cur.Comment}
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "match":
			req.Match = *match
		case "cloud-config":
			req.CloudConfig = ""
			if *cloudConfig != "" {
				b, err := readInput(*cloudConfig, s.stdin)
				if err != nil {
					ferr = fmt.Errorf("-cloud-config: %w", err)
				}
				req.CloudConfig = string(b)
			}
		case "overlays":
			req.Overlays = splitList(*overlays)
		case "layout":
			req.Layout = *layout
		case "comment":
			req.Comment = *comment
		}
	})
	if ferr != nil {
		return ferr
	}
	method, path := http.MethodPut, tagPath(req.Name)
	if create {
		method, path = http.MethodPost, "/api/v1/tags"
	}
	return fetch(c, method, path, req, *asJSON, s.stdout, printTagSaved)
}

// readInput reads a file, or standard input for "-".
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(stdin, 16<<20))
	}
	return os.ReadFile(name)
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func printTagSaved(w io.Writer, s wire.TagSaved) error {
	what := "manual only"
	if s.Tag.Match != "" {
		what = fmt.Sprintf("its rule matches %d %s", s.Matched, plural(s.Matched, "machine", "machines"))
	}
	fmt.Fprintf(w, "tag %s saved at index %d: %s; %d %s it\n", s.Tag.Name, s.Index, what, s.Tag.Machines, plural(s.Tag.Machines, "machine carries", "machines carry"))
	if len(s.Failures) > 0 {
		fmt.Fprintf(w, "the rule failed on %d %s, which keep their tags:\n", len(s.Failures), plural(len(s.Failures), "machine", "machines"))
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  %s: %s\n", f.Machine, f.Error)
		}
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func tagRm(args []string, s streams) error {
	fs := newFlags("tags rm", "rollcall tags rm NAME [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	return fetch(c, http.MethodDelete, tagPath(fs.Arg(0)), nil, *asJSON, s.stdout, func(w io.Writer, d wire.Deleted) error {
		_, err := fmt.Fprintf(w, "removed tag %s from every machine\n", d.Deleted)
		return err
	})
}

var (
	tagList = reader[wire.TagList]{name: "tags list", usage: "rollcall tags list [-json]", path: at("/api/v1/tags"),
		table: func(w io.Writer, l wire.TagList) error {
			tw := newTable(w)
			fmt.Fprintln(tw, "NAME\tMACHINES\tRULE\tLAYOUT\tCLOUD-CONFIG\tCOMMENT")
			for _, t := range l.Tags {
				cc := "-"
				if t.CloudConfig != "" {
					cc = fmt.Sprintf("%d bytes", len(t.CloudConfig))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", t.Name, t.Machines, dash(oneLine(t.Match)), dash(t.Layout), cc, dash(oneLine(t.Comment)))
			}
			return tw.Flush()
		}}
	tagShow = reader[wire.TagDetail]{name: "tags show", usage: "rollcall tags show NAME [-json]", nargs: 1,
		path: func(a []string) (string, error) { return tagPath(a[0]), nil },
		table: func(w io.Writer, t wire.TagDetail) error {
			err := printRows(w, [][2]string{
				{"Name", t.Name}, {"Rule", dash(t.Match)}, {"Layout", dash(t.Layout)}, {"Overlays", dash(strings.Join(t.Overlays, ", "))},
				{"Comment", dash(t.Comment)}, {"Machines", fmt.Sprintf("%d (%d manual)", t.Machines, len(t.Manual))},
				{"Created", stamp(t.Created)}, {"Updated", stamp(t.Updated)},
			})
			if err != nil {
				return err
			}
			if t.CloudConfig != "" {
				fmt.Fprintf(w, "\nCloud-config:\n%s", t.CloudConfig)
				if !strings.HasSuffix(t.CloudConfig, "\n") {
					fmt.Fprintln(w)
				}
			}
			if len(t.MachineIDs) > 0 {
				fmt.Fprintln(w, "\nMachines:")
				for _, id := range t.MachineIDs {
					how := "auto"
					for _, m := range t.Manual {
						if m == id {
							how = "manual"
						}
					}
					fmt.Fprintf(w, "  %s  %s\n", id, how)
				}
			}
			return nil
		}}
)

// oneLine is a text shortened to its first line, for a table cell.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func tagsText(manual, auto []string) string {
	all := append([]string(nil), manual...)
	for _, t := range auto {
		all = append(all, t+"*")
	}
	return dash(strings.Join(all, ","))
}

const tagVerbUsage = "rollcall tag ID|NAME|tag:NAME +add -remove [+add …] [-json]  (after --, every +x and -x is a tag)"

// cmdTag is `rollcall tag ID|tag:NAME +a -b [+c …] [-json]`: manual tags
// given (+) and taken away (-). A tag named json or data is written after
// "--", where every -x is a tag.
func cmdTag(args []string, s streams) error {
	var flags, machines, add, remove []string
	tagsOnly := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "+"):
			add = append(add, a[1:])
		case a == "--":
			tagsOnly = true
		case !tagsOnly && (a == "-json" || a == "--json" || strings.HasPrefix(a, "-data=") || strings.HasPrefix(a, "--data=")):
			flags = append(flags, a)
		case !tagsOnly && (a == "-data" || a == "--data"):
			flags = append(flags, a)
			if i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			remove = append(remove, a[1:])
		default:
			machines = append(machines, a)
		}
	}
	fs := newFlags("tag", tagVerbUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(flags, 0)
	if err != nil {
		return err
	}
	if len(machines) != 1 || len(add)+len(remove) == 0 {
		return errors.New("usage: " + tagVerbUsage)
	}
	req := wire.MachineTagsRequest{Add: add, Remove: remove}
	return c.eachMachine(machines[0], *asJSON, s.stdout, func(id string) outcome {
		return call(c, http.MethodPost, machinePath(id, "tags"), req, func(m wire.MachineView) string {
			return fmt.Sprintf("%s: tags %s, auto %s", m.ID, dash(strings.Join(m.Tags, ",")), dash(strings.Join(m.AutoTags, ",")))
		})
	})
}
