package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// The deployment faces of the console: Deploy… (an OS and version from
// the catalog), Release… (quick or full wipe) and Cancel job in the actions
// menu, each confirmed; and the machine view's deployment section with the
// job's progress, which follows the job through blocking queries on
// /machines/{id}/jobs while the machine is on show.
//
// The API has no dry run: the disk the rule chooses is in the job the
// deploy answers with, before anything is written (the machine writes once
// it network-boots the deploy agent), and Cancel job stops it until then.

// DeployJobs implements Source: the machine's deploy and release jobs,
// newest first; with index > 0 it blocks until the jobs move past index or
// wait passes.
func (c *Client) DeployJobs(ctx context.Context, id string, index uint64, wait time.Duration) (wire.DeployJobList, error) {
	path, timeout := machinePath(id)+"/jobs", readTimeout
	if index > 0 {
		path += fmt.Sprintf("?index=%d&wait=%s", index, wait)
		timeout += wait
	}
	var v wire.JobList
	err := c.do(ctx, timeout, http.MethodGet, path, nil, &v)
	return wire.DeployJobList{Index: v.Index, Jobs: v.Deploy}, err
}

// doDeploy runs the deployment actions; ok is false for another kind.
func (c *Client) doDeploy(ctx context.Context, a Action) (out string, ok bool, err error) {
	p := machinePath(a.Machine)
	var j wire.DeployJob
	switch a.Kind {
	case "deploy":
		os, version, _ := strings.Cut(a.Arg, "@")
		err = c.do(ctx, actionTimeout, http.MethodPost, p+"/deploy", wire.DeployRequest{OS: os, Version: version}, &j)
	case "release":
		err = c.do(ctx, actionTimeout, http.MethodPost, p+"/release", wire.ReleaseRequest{Wipe: a.Arg}, &j)
	case "cancel":
		err = c.do(ctx, actionTimeout, http.MethodPost, p+"/jobs/cancel", nil, &j)
	default:
		return "", false, nil
	}
	if err != nil {
		return "", true, err
	}
	return deployOutcome(a.Kind, j), true, nil
}

// deployOutcome says what a deploy, release or cancel made.
func deployOutcome(kind string, j wire.DeployJob) string {
	switch kind {
	case "deploy":
		return fmt.Sprintf("job %s: %s %s onto %s (%s); writes when it network-boots", j.ID, j.OS, j.OSVersion, diskOf(j.Disk), dash(j.Disk.Rule))
	case "release":
		return fmt.Sprintf("job %s: %s wipe of %s", j.ID, dash(j.Wipe), diskOf(j.Disk))
	}
	return fmt.Sprintf("job %s %s", j.ID, j.State)
}

func diskOf(d wire.JobDisk) string {
	if d.Name == "" {
		return "no disk"
	}
	id := ""
	switch {
	case d.Serial != "":
		id = " serial " + d.Serial
	case d.WWN != "":
		id = " WWN " + d.WWN
	}
	return fmt.Sprintf("%s %s%s", d.Name, humanBytes(d.Size), id)
}

// deployMenu reads the catalog (in the background when live), then
// offers its versions.
func (c *console) deployMenu(ms []wire.MachineView) {
	c.closeDialog()
	if !c.live {
		c.fetch(c.ctx, "os")()
		c.osMenu(ms)
		return
	}
	c.setMsg("deploy: reading the OS catalog…", false)
	go func() {
		apply := c.fetch(c.ctx, "os")
		c.app.QueueUpdateDraw(func() {
			apply()
			if c.errs["os"] == nil {
				c.setMsg("", false)
				c.osMenu(ms)
			}
		})
	}()
}

// osMenu picks an OS version from the catalog, then confirms.
func (c *console) osMenu(ms []wire.MachineView) {
	type choice struct{ arg, text string }
	var choices []choice
	for _, im := range c.osList.Images {
		if im.Current != "" {
			choices = append(choices, choice{im.Name, fmt.Sprintf("%s (current %s)", im.Name, im.Current)})
		}
		for i := len(im.Versions) - 1; i >= 0; i-- {
			v := im.Versions[i].Version
			choices = append(choices, choice{im.Name + "@" + v, im.Name + " " + v})
		}
	}
	if len(choices) == 0 {
		c.closeDialog()
		c.setMsg("deploy: the OS catalog is empty (rollcall os sync, or rollcall os import)", true)
		return
	}
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" Deploy " + targetTitle(ms) + " with ")
	for i, ch := range choices[:min(len(choices), 9)] {
		l.AddItem(esc(ch.text), "", rune('1'+i), func() {
			c.closeDialog()
			c.confirmRun(ms, menuItem{label: "Deploy " + ch.text, kind: "deploy", arg: ch.arg, confirm: "Deploy",
				describe: "overwrites the disk the rule chooses (the smallest non-removable, writable disk that fits; never a USB stick) with " + ch.text +
					". The job names the disk before anything is written; Cancel job stops it until the machine writes"})
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 56, min(len(choices), 9)+2), l)
}

// releaseMenu picks the wipe, then confirms.
func (c *console) releaseMenu(ms []wire.MachineView) {
	l := tview.NewList().ShowSecondaryText(false).SetHighlightFullLine(true)
	l.SetBorder(true).SetTitle(" Release " + targetTitle(ms) + " ")
	for _, w := range []struct {
		arg  string
		key  rune
		text string
	}{{"quick", 'q', "Quick wipe (signatures and partition tables)"}, {"full", 'f', "Full wipe (every block, slow)"}} {
		l.AddItem(w.text, "", w.key, func() {
			c.closeDialog()
			c.confirmRun(ms, menuItem{label: "Release (" + w.arg + " wipe)", kind: "release", arg: w.arg, confirm: "Release",
				describe: "wipes the deployed disk (" + w.arg + ") and gives the machine back to ready with its addresses freed; the installed system is destroyed"})
		})
	}
	l.SetDoneFunc(c.closeDialog)
	c.dialog(center(l, 52, 4), l)
}

// renderDeployment writes the machine view's deployment section: the
// newest deploy or release job with its progress and steps.
func (c *console) renderDeployment(b *strings.Builder) {
	if len(c.deployJobs) == 0 {
		return
	}
	j := c.deployJobs[0]
	title := "Deployment"
	if j.Kind == "release" {
		title = "Release"
	}
	fmt.Fprintf(b, "\n[yellow]%s[-]  job %s [%s]%s[-]\n", title, esc(j.ID), jobColor(j.State), esc(j.State))
	row := func(k, v string) { fmt.Fprintf(b, "  %-11s %s\n", k, esc(v)) }
	if j.OS != "" {
		row("OS", j.OS+" "+j.OSVersion)
	}
	row("Disk", diskOf(j.Disk)+" · "+dash(j.Disk.Rule))
	if j.Wipe != "" {
		row("Wipe", j.Wipe)
	}
	if j.FQDN != "" || j.Hostname != "" {
		row("Hostname", dash(firstOf(j.FQDN, j.Hostname)))
	}
	p := j.Progress
	switch {
	case p.Step == "":
		row("Step", "waiting for the machine to boot the deploy agent")
	case p.Total > 0:
		pct := min(100, int(100*p.Bytes/p.Total))
		bar := strings.Repeat("█", pct/5) + strings.Repeat("─", 20-pct/5)
		row("Step", fmt.Sprintf("%s %s %s %3d%% %s of %s", p.Step, p.State, bar, pct, humanBytes(p.Bytes), humanBytes(p.Total)))
	default:
		row("Step", p.Step+" "+p.State)
	}
	if !p.Updated.IsZero() {
		row("Reported", c.stamp(p.Updated))
	}
	if j.Cancel {
		row("Cancel", "requested: the agent wipes the disk and fails")
	}
	if j.Error != "" {
		fmt.Fprintf(b, "  [red]%-11s %s[-]\n", "Error", esc(j.Error))
	}
	if !j.PhonedHome.IsZero() {
		row("Phoned home", c.stamp(j.PhonedHome)+" "+j.PhoneHost)
	}
	for _, s := range j.Steps {
		msg := ""
		if s.Message != "" {
			msg = " · " + s.Message
		}
		fmt.Fprintf(b, "    %s  %-10s [%s]%s[-]%s\n", fullStamp(s.At), esc(s.Step), stepColor(s.State), esc(s.State), esc(msg))
	}
	if j.State == "queued" || j.State == "running" {
		b.WriteString("  a → Cancel job\n")
	}
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func jobColor(state string) string {
	switch state {
	case "done":
		return "green"
	case "failed", "cancelled":
		return "red"
	}
	return "yellow"
}

func stepColor(state string) string {
	if state == "failed" {
		return "red"
	}
	if state == "done" {
		return "green"
	}
	return "yellow"
}

// followJobs follows the deploy jobs of the machine on show with blocking
// queries, and redraws the machine view on each change.
func (c *console) followJobs() {
	var index uint64
	var id string
	for c.ctx.Err() == nil {
		cur := make(chan string, 1)
		c.app.QueueUpdate(func() {
			if c.page == "machine" {
				cur <- c.detailID
			} else {
				cur <- ""
			}
		})
		var now string
		select {
		case now = <-cur:
		case <-c.ctx.Done():
			return
		}
		if now == "" {
			index = 0
			c.sleep(time.Second)
			continue
		}
		if now != id {
			id, index = now, 0
		}
		l, err := c.src.DeployJobs(c.ctx, id, index, 30*time.Second)
		if err != nil {
			index = 0
			c.sleep(3 * time.Second)
			continue
		}
		if index == 0 || l.Index != index {
			c.app.QueueUpdateDraw(func() {
				if c.detailID == id {
					c.deployJobs = l.Jobs
					c.render()
				}
			})
		}
		index = l.Index
	}
}
