package appliance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// cmdImage runs `rollcall image import|list|rm`.
func cmdImage(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall image import NAME -kernel F -initrd F [-squashfs F] | list [-json] | rm NAME")
	}
	fs := flag.NewFlagSet("image "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "import":
		files := map[string]*string{}
		for _, f := range store.ImageFileNames {
			files[f] = fs.String(f, "", "path of the "+f)
		}
		c, err := newClient(fs, flagsFirstWith(args[1:], "kernel", "initrd", "squashfs", "data"))
		if err != nil {
			return err
		}
		name, err := oneArg(fs, "rollcall image import NAME -kernel F -initrd F [-squashfs F]")
		if err != nil {
			return err
		}
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
	case "list":
		asJSON := fs.Bool("json", false, "print JSON")
		c, err := newClient(fs, args[1:])
		if err != nil {
			return err
		}
		type imageList struct {
			Images []wire.Image `json:"images"`
		}
		return exchange(c, http.MethodGet, "/api/v1/images", nil, *asJSON, stdout, func(stdout io.Writer, v imageList) error {
			return printImages(stdout, v.Images)
		})
	case "rm":
		c, err := newClient(fs, flagsFirst(args[1:]))
		if err != nil {
			return err
		}
		name, err := oneArg(fs, "rollcall image rm NAME")
		if err != nil {
			return err
		}
		if err := c.do(http.MethodDelete, "/api/v1/images/"+url.PathEscape(name), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed image %s\n", name)
		return nil
	}
	return fmt.Errorf("unknown image command %q (import, list, rm)", args[0])
}

// upload sends a raw body of known length.
func (c *client) upload(method, path string, body io.Reader, size int64, out any) error {
	return c.api.Upload(context.Background(), method, path, body, size, out)
}

// flagsFirstWith is flagsFirst for commands whose listed flags take a value.
func flagsFirstWith(args []string, valued ...string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && a != "-" {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && i+1 < len(args) {
				for _, v := range valued {
					if name == v {
						flags = append(flags, args[i+1])
						i++
						break
					}
				}
			}
			continue
		}
		rest = append(rest, a)
	}
	return append(flags, rest...)
}

func printImages(w io.Writer, images []wire.Image) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
