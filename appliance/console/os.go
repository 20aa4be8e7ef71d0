package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/rollcall/rollcall/appliance/wire"
)

// OS implements Source: GET /api/v1/os.
func (c *Client) OS(ctx context.Context) (wire.OSList, error) {
	var v wire.OSList
	err := c.do(ctx, readTimeout, http.MethodGet, "/api/v1/os", nil, &v)
	return v, err
}

// renderOS is the OS images page: every name with its track and current
// version, the versions with sizes, hashes, import time and holders, and
// the state of the catalog's sync.
func (c *console) renderOS() {
	var b strings.Builder
	b.WriteString(c.errText("os"))
	l := c.osList
	total := l.Nodes
	s := l.Sync
	switch {
	case s.Running:
		fmt.Fprintf(&b, " [yellow]Sync running on %s since %s[-]\n", esc(dash(s.Node)), c.stamp(s.Started))
	case !s.Finished.IsZero():
		fmt.Fprintf(&b, " Last sync %s", c.stamp(s.Finished))
		if s.Error != "" {
			fmt.Fprintf(&b, " [red]failed: %s[-]", esc(s.Error))
		} else if len(s.Result) > 0 {
			fmt.Fprintf(&b, ": %s", esc(strings.Join(s.Result, "; ")))
		}
		b.WriteString("\n")
	default:
		b.WriteString(" No sync yet\n")
	}
	fmt.Fprintf(&b, " Sources %s · sync now: rollcall os sync\n\n", esc(dash(strings.Join(l.Sources, ", "))))
	if len(l.Images) == 0 {
		b.WriteString(" no OS images: rollcall os sync, or rollcall os import NAME FILE\n")
		c.osTV.SetText(b.String())
		return
	}
	for _, im := range l.Images {
		track := im.Track
		if track == "" {
			track = "latest"
		}
		fmt.Fprintf(&b, " [::b]%s[::-]  %s · track %s · current %s\n", esc(im.Name), esc(dash(im.Family)), esc(track), esc(dash(im.Current)))
		var rows [][]string
		for i := len(im.Versions) - 1; i >= 0; i-- { // newest first
			v := im.Versions[i]
			cur := ""
			if v.Version == im.Current {
				cur = "*"
			}
			nodes := fmt.Sprint(len(v.Nodes))
			if total > 0 {
				nodes = fmt.Sprintf("%d of %d", len(v.Nodes), total)
			}
			rows = append(rows, []string{cur + v.Version, humanBytes(v.Size), humanBytes(v.RawSize), short(v.SHA256), short(v.RawSHA256), c.stamp(v.Imported), nodes})
		}
		b.WriteString(grid([]string{"VERSION", "FILE", "RAW", "SHA256", "RAW SHA256", "IMPORTED", "ON NODES"}, rows, func(r, col int, s string) string {
			if col == 6 && total > 0 && len(im.Versions[len(im.Versions)-1-r].Nodes) < total {
				return "[yellow]" + s + "[-]"
			}
			if col == 0 && strings.HasPrefix(rows[r][0], "*") {
				return "[green]" + s + "[-]"
			}
			return s
		}))
		b.WriteString("\n")
	}
	b.WriteString(" * current · promote: rollcall os promote NAME VERSION · remove: rollcall os rm NAME VERSION\n")
	c.osTV.SetText(b.String())
}

// short is a hash's first 12 hex digits.
func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return dash(h)
}
