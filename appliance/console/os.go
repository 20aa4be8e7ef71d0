package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

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
	fmt.Fprintf(&b, " Sources %s · s syncs now\n\n", esc(dash(strings.Join(l.Sources, ", "))))
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
	b.WriteString(" * current · s sync now · p promote a version · remove: rollcall os rm NAME VERSION\n")
	c.osTV.SetText(b.String())
}

// short is a hash's first 12 hex digits.
func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return dash(h)
}

// OSActions may be implemented by a Source: the OS page's sync and
// promote. Without it the page only shows the catalog.
type OSActions interface {
	// OSSync syncs os_sources now (names: all when empty), calling line
	// with each progress line, and returns what the sync did.
	OSSync(ctx context.Context, names []string, line func(wire.OSProgress)) ([]wire.OSSyncResult, error)
	// OSPromote makes a version current.
	OSPromote(ctx context.Context, name, version string) error
}

// osSyncTimeout bounds a sync the console starts (downloads of whole
// cloud images).
const osSyncTimeout = 2 * time.Hour

// OSSync implements OSActions: POST /api/v1/os/sync, an NDJSON stream.
func (c *Client) OSSync(ctx context.Context, names []string, line func(wire.OSProgress)) ([]wire.OSSyncResult, error) {
	ctx, cancel := context.WithTimeout(ctx, osSyncTimeout)
	defer cancel()
	var res *wire.OSResult
	var failed error
	err := c.api.Stream(ctx, http.MethodPost, "/api/v1/os/sync", wire.OSSyncRequest{Names: names}, nil, 0, func(b []byte) error {
		var l wire.OSStreamLine
		if err := json.Unmarshal(b, &l); err != nil {
			return err
		}
		switch {
		case l.Progress != nil:
			line(*l.Progress)
		case l.Result != nil:
			res = l.Result
		case l.Error != nil:
			failed = errors.New(l.Error.Message)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, failed
	}
	if res == nil {
		return nil, errors.New("the sync's stream ended without a result")
	}
	return res.Sync, nil
}

// OSPromote implements OSActions: POST /api/v1/os/{name}/promote.
func (c *Client) OSPromote(ctx context.Context, name, version string) error {
	return c.do(ctx, actionTimeout, http.MethodPost, "/api/v1/os/"+url.PathEscape(name)+"/promote", wire.OSPromoteRequest{Version: version}, nil)
}

// osKeys are the OS page's keys: s syncs, p promotes.
func (c *console) osKeys(ev *tcell.EventKey) *tcell.EventKey {
	if ev.Key() != tcell.KeyRune {
		return ev
	}
	switch ev.Rune() {
	case 's':
		c.confirmOSSync()
		return nil
	case 'p':
		c.promoteMenu()
		return nil
	}
	return ev
}

func (c *console) osActions() (OSActions, bool) {
	oa, ok := c.src.(OSActions)
	if !ok {
		c.setMsg("os: this source cannot sync or promote", true)
		c.render()
	}
	return oa, ok
}

func (c *console) confirmOSSync() {
	oa, ok := c.osActions()
	if !ok {
		return
	}
	srcs := dash(strings.Join(c.osList.Sources, ", "))
	c.modal("Sync the OS images now?\n\nThe leader fetches each source's checksum file ("+srcs+") and downloads only what changed; it may take a while. The page follows it.",
		[]string{"Cancel", "Sync now"}, func(label string) {
			if label != "Sync now" {
				c.setMsg("os sync: cancelled", false)
				return
			}
			c.runOS("os sync", func(report func(string)) (string, error) {
				res, err := oa.OSSync(c.ctx, nil, func(p wire.OSProgress) {
					msg := "os sync: " + dash(p.Name) + " " + p.Step
					if p.Total > 0 {
						msg += fmt.Sprintf(" %d%%", p.Bytes*100/p.Total)
					}
					if p.Message != "" {
						msg += ": " + p.Message
					}
					report(msg)
				})
				if err != nil {
					return "", err
				}
				var parts []string
				for _, r := range res {
					s := r.Name + " " + r.Action
					if r.Version != "" {
						s += " " + r.Version
					}
					if r.Message != "" {
						s += ": " + r.Message
					}
					parts = append(parts, s)
				}
				return "os sync: " + dash(strings.Join(parts, "; ")), nil
			})
		})
}

// promoteMenu lists the versions that are not current, newest first.
func (c *console) promoteMenu() {
	oa, ok := c.osActions()
	if !ok {
		return
	}
	type choice struct{ name, version string }
	var choices []choice
	for _, im := range c.osList.Images {
		for i := len(im.Versions) - 1; i >= 0; i-- {
			if v := im.Versions[i]; v.Version != im.Current {
				choices = append(choices, choice{im.Name, v.Version})
			}
		}
	}
	if len(choices) == 0 {
		c.setMsg("promote: every OS image's only version is current", true)
		c.render()
		return
	}
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" Promote a version ")
	shown := choices[:min(len(choices), 9)]
	for i, ch := range shown {
		l.AddItem(esc(ch.name+" "+ch.version), "", rune('1'+i), func() {
			c.closeDialog()
			c.modal(fmt.Sprintf("Make %s %s current?\n\nDeployments that name %s without a version get it from now on; the name is pinned to it until the next promote.", ch.name, ch.version, ch.name),
				[]string{"Cancel", "Promote"}, func(label string) {
					if label != "Promote" {
						c.setMsg("promote: cancelled", false)
						return
					}
					c.runOS("promote", func(func(string)) (string, error) {
						if err := oa.OSPromote(c.ctx, ch.name, ch.version); err != nil {
							return "", err
						}
						return fmt.Sprintf("promote: %s %s is current", ch.name, ch.version), nil
					})
				})
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 50, len(shown)+2), l)
}

// runOS runs an OS action off the screen's goroutine (inline in dumps
// and tests), shows its progress and outcome in the message line, and
// reloads the page.
func (c *console) runOS(what string, work func(report func(string)) (string, error)) {
	c.busy++
	c.setMsg(what+"…", false)
	finish := func(out string, err error) {
		c.busy--
		if err != nil {
			c.setMsg(what+": "+err.Error(), true)
		} else {
			c.setMsg(out, false)
		}
		c.load("os")
		c.render()
	}
	if !c.live {
		finish(work(func(msg string) { c.setMsg(msg, false) }))
		return
	}
	go func() {
		out, err := work(func(msg string) {
			c.app.QueueUpdateDraw(func() { c.setMsg(msg, false); c.render() })
		})
		c.app.QueueUpdateDraw(func() { finish(out, err) })
	}()
}
