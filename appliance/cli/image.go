package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// cmdImage is `rollcall image import|list|rm`.
func cmdImage(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall image import NAME -kernel F -initrd F [-squashfs F] | list [-json] | rm NAME")
	}
	switch args[0] {
	case "import":
		return imageImport(args[1:], s.stdout)
	case "list":
		return reader[wire.ImageList]{name: "image list", nargs: anyArgs, path: at("/api/v1/images"),
			table: func(w io.Writer, v wire.ImageList) error { return printImages(w, v.Images) }}.run(args[1:], s.stdout)
	case "rm":
		fs := newFlags("image rm", "rollcall image rm NAME")
		c, err := fs.client(args[1:], 1)
		if err != nil {
			return err
		}
		name := fs.Arg(0)
		if err := c.do(http.MethodDelete, "/api/v1/images/"+url.PathEscape(name), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "removed image %s\n", name)
		return nil
	}
	return fmt.Errorf("unknown image command %q (import, list, rm)", args[0])
}

// imageImport uploads an image's files to one node, then records the image;
// the other nodes fetch and verify the files themselves.
func imageImport(args []string, stdout io.Writer) error {
	fs := newFlags("image import", "rollcall image import NAME -kernel F -initrd F [-squashfs F]")
	files := map[string]*string{}
	for _, f := range store.ImageFileNames {
		files[f] = fs.String(f, "", "path of the "+f)
	}
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	if err := store.ValidImageName(name); err != nil {
		return err
	}
	if *files["kernel"] == "" || *files["initrd"] == "" {
		return errors.New("-kernel and -initrd are required")
	}
	var req wire.ImageRequest
	req.Name = name
	for _, fname := range store.ImageFileNames {
		path := *files[fname]
		if path == "" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			f.Close()
			return fmt.Errorf("%s: not a regular file", path)
		}
		fmt.Fprintf(stdout, "uploading %s (%s, %s)… ", fname, path, humanBytes(st.Size()))
		var got wire.ImageFile
		err = c.upload(http.MethodPut, "/api/v1/images/"+url.PathEscape(name)+"/files/"+fname, f, st.Size(), &got)
		f.Close()
		if err != nil {
			fmt.Fprintln(stdout)
			return err
		}
		fmt.Fprintf(stdout, "sha256 %s\n", got.SHA256[:16])
		req.Files = append(req.Files, got)
	}
	var im wire.Image
	if err := c.do(http.MethodPost, "/api/v1/images", req, &im); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s imported on %s; other nodes fetch and verify it now\n", im.Name, strings.Join(im.Nodes, ", "))
	return nil
}

func printImages(w io.Writer, images []wire.Image) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tFILES\tSIZE\tNODES\tCREATED")
	for _, im := range images {
		var names []string
		var size int64
		for _, f := range im.Files {
			names = append(names, f.Name)
			size += f.Size
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", im.Name, strings.Join(names, ","), humanBytes(size), strings.Join(im.Nodes, ","), im.Created.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}
