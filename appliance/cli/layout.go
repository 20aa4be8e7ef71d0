package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The layout verbs: interface layouts, the JSON files the reference's
// "Machine interfaces" describes. add and set send the file as it is
// written (layout show gives it back the same); the node parses it and
// answers a refusal with the field and the interface it is about.

const layoutUsage = "rollcall layout add NAME FILE.json [-comment TEXT] | set NAME FILE.json [-comment TEXT] | rm NAME | list [-json] | show NAME [-json]"

// maxLayoutFile bounds the file read: the node takes at most 64 KiB.
const maxLayoutFile = 64 << 10

func cmdLayout(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: " + layoutUsage)
	}
	verbs := map[string]func([]string, io.Writer) error{
		"add":  func(a []string, w io.Writer) error { return layoutSave(a, w, false) },
		"set":  func(a []string, w io.Writer) error { return layoutSave(a, w, true) },
		"rm":   layoutRm,
		"list": layoutList.run,
		"show": layoutShow.run,
	}
	h, ok := verbs[args[0]]
	if !ok {
		return fmt.Errorf("unknown layout command %q; usage: %s", args[0], layoutUsage)
	}
	return h(args[1:], s.stdout)
}

func layoutPath(name string) string { return "/api/v1/layouts/" + url.PathEscape(name) }

func layoutSave(args []string, stdout io.Writer, replace bool) error {
	verb, method, done := "add", http.MethodPost, "added"
	if replace {
		verb, method, done = "set", http.MethodPut, "replaced"
	}
	fs := newFlags("layout "+verb, "rollcall layout "+verb+" NAME FILE.json [-comment TEXT]")
	comment := fs.String("comment", "", "one line saying what the layout is for")
	c, err := fs.client(args, 2)
	if err != nil {
		return err
	}
	f, err := os.Open(fs.Arg(1))
	if err != nil {
		return err
	}
	defer f.Close()
	doc, err := io.ReadAll(io.LimitReader(f, maxLayoutFile+1))
	if err != nil {
		return err
	}
	if len(doc) > maxLayoutFile {
		return fmt.Errorf("%s is larger than the %d bytes a layout may have", fs.Arg(1), maxLayoutFile)
	}
	path := layoutPath(fs.Arg(0))
	if *comment != "" {
		path += "?comment=" + url.QueryEscape(*comment)
	}
	var l wire.LayoutView
	if err := c.upload(method, path, bytes.NewReader(doc), int64(len(doc)), &l); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "layout %s %s\n", l.Name, done)
	return nil
}

func layoutRm(args []string, stdout io.Writer) error {
	fs := newFlags("layout rm", "rollcall layout rm NAME")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if err := c.do(http.MethodDelete, layoutPath(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "layout %s removed\n", fs.Arg(0))
	return nil
}

var (
	layoutList = reader[wire.LayoutList]{name: "layout list", usage: "rollcall layout list [-json]", path: at("/api/v1/layouts"),
		table: func(w io.Writer, l wire.LayoutList) error {
			tw := newTable(w)
			fmt.Fprintln(tw, "NAME\tINTERFACES\tCREATED\tCOMMENT")
			for _, v := range l.Layouts {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", v.Name, interfacesIn(v.JSON), stamp(v.Created), dash(v.Comment))
			}
			return tw.Flush()
		}}
	layoutShow = reader[wire.LayoutView]{name: "layout show", usage: "rollcall layout show NAME [-json]", nargs: 1,
		path: func(a []string) (string, error) { return layoutPath(a[0]), nil },
		table: func(w io.Writer, v wire.LayoutView) error {
			// The file as it was saved, so that show > FILE.json gives
			// it back; -json has the name, comment and dates too.
			text := v.JSON
			if !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			_, err := io.WriteString(w, text)
			return err
		}}
)

// interfacesIn counts the interfaces of a saved layout for the list.
func interfacesIn(doc string) int {
	var d wire.LayoutDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return 0
	}
	return len(d.Interfaces)
}
