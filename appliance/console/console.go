// Package console is Rollcall's full-screen terminal console, built with
// rivo/tview: the fleet down the left, the chosen page on the right, keys
// along the bottom, keyboard only, so it works on the appliance's own screen,
// over a serial line or a BMC KVM, and over SSH.
//
// It is an API client like the CLI: everything it shows and does goes
// through a Source, which *Client implements over the management API. It owns
// the client config file (client.json) the CLI shares, the first-boot setup
// (Setup) and one-screen text dumps (Dump). Package appliance wires it into
// the rollcall command; this package must not import appliance.
package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/wire"
)

// Options says which API the console talks to.
type Options struct {
	URL    string // e.g. http://127.0.0.1:8080; with Token, skips the config file
	Token  string // admin token
	CAFile string // cluster CA (PEM) for an https URL
	// ConfigPath is the client config to read when URL or Token is missing,
	// and to write after asking for them (default DefaultConfigPath()).
	ConfigPath string
	// Source replaces the HTTP client (tests; embedding in a process that
	// already holds an API client).
	Source Source
	// Screen is the terminal; nil opens the process's own.
	Screen tcell.Screen
}

// Run shows the console until the operator quits (q) or ctx ends. With no
// URL or token known, it asks for both once and saves them to the client
// config.
func Run(ctx context.Context, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	app := tview.NewApplication()
	if o.Screen != nil {
		app.SetScreen(o.Screen)
	}
	go func() {
		<-ctx.Done()
		app.Stop()
	}()
	if o.Source != nil {
		newConsole(ctx, app, o.Source, true).start()
		return app.Run()
	}
	cl, cfg, path, err := o.client()
	if err != nil {
		return err
	}
	if cl != nil {
		newConsole(ctx, app, cl, true).start()
		return app.Run()
	}
	var runErr error
	showLogin(ctx, app, cfg, path, func(cl *Client) {
		newConsole(ctx, app, cl, true).start()
	}, func(err error) { runErr = err })
	if err := app.Run(); err != nil {
		return err
	}
	return runErr
}

// Client is the API client the options name, with what they lack taken
// from the client config; it never asks (for -dump and scripts).
func (o Options) Client() (*Client, error) {
	cl, _, path, err := o.client()
	if err == nil && cl == nil {
		err = fmt.Errorf("no API to talk to: set ROLLCALL_URL and ROLLCALL_TOKEN, run on a node, or run rollcall once in a terminal to write %s", path)
	}
	return cl, err
}

// client resolves the options: a client when URL and token are known,
// else what is known so far and where to save the rest.
func (o Options) client() (*Client, ClientConfig, string, error) {
	cfg := ClientConfig{URL: o.URL, Token: o.Token, CAFile: o.CAFile}
	path := o.ConfigPath
	if cfg.URL == "" || cfg.Token == "" {
		if path == "" {
			var err error
			if path, err = DefaultConfigPath(); err != nil {
				return nil, cfg, "", err
			}
		}
		saved, err := LoadClientConfig(path)
		switch {
		case err == nil:
			cfg = fillConfig(cfg, saved)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, cfg, path, err
		}
	}
	if cfg.URL != "" && cfg.Token == "" && cfg.HasCert() && strings.HasPrefix(cfg.URL, "https://") {
		// Signed in by an administrator's certificate (rollcall
		// admin-cert request), as the CLI is.
		cl, err := NewCertClient(cfg.URL, cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		return cl, cfg, path, err
	}
	if cfg.URL == "" || cfg.Token == "" {
		return nil, cfg, path, nil
	}
	cl, err := NewClient(cfg.URL, cfg.Token, cfg.CAFile)
	return cl, cfg, path, err
}

// fillConfig takes what is missing in c from saved; a URL given on its own
// keeps its own token only if one was given too.
func fillConfig(c, saved ClientConfig) ClientConfig {
	if c.URL == "" {
		c.URL, c.CAFile, c.CertFile, c.KeyFile = saved.URL, saved.CAFile, saved.CertFile, saved.KeyFile
	}
	if c.Token == "" {
		c.Token = saved.Token
	}
	return c
}

// Interactive reports whether both files are terminals: a bare rollcall
// opens the console only then, and prints its help in a pipe.
func Interactive(in, out *os.File) bool {
	for _, f := range []*os.File{in, out} {
		st, err := f.Stat()
		if err != nil || st.Mode()&os.ModeCharDevice == 0 {
			return false
		}
	}
	return true
}

// Pages, in the order of the list on the left (the number keys choose them).
var navPages = []struct{ name, label, section string }{
	{"overview", "Overview", "Fleet"},
	{"machines", "Machines", ""},
	{"racks", "Racks", ""},
	{"tags", "Tags", ""},
	{"cluster", "Cluster", ""},
	{"events", "Events", ""},
	{"network", "Network", "Setup"},
	{"images", "Images", ""},
	{"os", "OS images", ""},
	{"profiles", "Profiles", ""},
	{"doctor", "Doctor", ""},
	{"access", "Access", ""},
}

// PageNames are the pages Dump can render: each page of the list,
// machine/ID for one machine, rack/NAME for a rack's elevation, tag/NAME
// for one tag and profile/NAME for one stateless profile.
func PageNames() []string {
	var out []string
	for _, p := range navPages {
		out = append(out, p.name)
	}
	return append(out, "machine/ID", "rack/NAME", "tag/NAME", "profile/NAME")
}

// navKey is the number key of the i-th page: 1 to 9, then 0; the pages
// after the tenth have none (' '): the list and Enter reach them.
func navKey(i int) rune {
	switch {
	case i == 9:
		return '0'
	case i > 9:
		return ' '
	}
	return rune('1' + i)
}

const navWidth = 14

// console is one session's state and widgets. Everything except the
// fetching goroutines runs on tview's event goroutine.
type console struct {
	ctx  context.Context
	app  *tview.Application
	src  Source
	now  func() time.Time
	live bool // fetch in the background and follow changes; false: Dump

	machines wire.MachineList
	haveMach bool
	cluster  wire.ClusterView
	events   []wire.Event
	network  Network
	images   []wire.Image
	doctor   *wire.DoctorReport
	access   *accessView
	osList   wire.OSList
	racks    []wire.Rack
	rack     rackView
	tags     []wire.Tag
	tag      tagView
	// profiles are the stateless profiles; nodes the stateless nodes by
	// machine ID (haveNodes once read).
	profiles     []wire.Profile
	haveProfiles bool
	clusterVars  map[string]string // shown under a profile's own, when the source reads them
	profile      profileView
	nodes        map[string]wire.StatelessNode
	haveNodes    bool
	errs         map[string]error // what → last load error
	detail       *wire.MachineDetail
	detailID     string
	jobs         []wire.Job
	detailErr    error
	// deployJobs are the machine's deploy and release jobs, newest first.
	deployJobs []wire.DeployJob
	// plan is the machine's network plan, or planErr why it has none.
	plan    *wire.NetworkPlan
	planErr error

	filter   string
	state    string // "" for every state
	selected map[string]bool
	shown    []wire.MachineView

	page     string // the page on the right
	back     string // where Esc goes from a machine
	msg      string
	msgErr   bool
	busy     int // actions running
	dialogOn bool
	before   tview.Primitive // focus before a dialog

	root      *tview.Pages
	nav       *tview.Table
	body      *tview.Pages
	overview  *tview.TextView
	filterIn  *tview.InputField
	table     *machineTable
	machineTV *tview.TextView
	clusterTV *tview.TextView
	eventsT   *tview.Table
	networkTV *tview.TextView
	imagesTV  *tview.TextView
	doctorTV  *tview.TextView
	accessTV  *tview.TextView
	racksT    *tview.Table
	rackT     *tview.Table
	tagsT     *tview.Table
	tagTV     *tview.TextView
	osTV      *tview.TextView
	profilesT *tview.Table
	profileTV *tview.TextView
}

func newConsole(ctx context.Context, app *tview.Application, src Source, live bool) *console {
	c := &console{ctx: ctx, app: app, src: src, live: live, now: time.Now, errs: map[string]error{}, selected: map[string]bool{}}
	if clk, ok := src.(Clock); ok {
		c.now = clk.Now
	}
	c.build()
	return c
}

func (c *console) build() {
	c.nav = tview.NewTable().SetSelectable(true, false)
	c.nav.SetBorder(true).SetTitle(" Rollcall ")
	row := 0
	for i, p := range navPages {
		if p.section != "" {
			if row > 0 {
				c.nav.SetCell(row, 0, tview.NewTableCell("").SetSelectable(false))
				row++
			}
			c.nav.SetCell(row, 0, tview.NewTableCell(p.section).SetSelectable(false).SetTextColor(tcell.ColorYellow))
			row++
		}
		c.nav.SetCell(row, 0, tview.NewTableCell(fmt.Sprintf("%c %s", navKey(i), p.label)).SetReference(p.name).SetExpansion(1))
		row++
	}
	c.nav.SetSelectionChangedFunc(func(r, _ int) {
		if name, ok := c.nav.GetCell(r, 0).GetReference().(string); ok && name != c.navName() {
			c.show(name)
		}
	})
	c.nav.SetSelectedFunc(func(int, int) { c.focusBody() })
	c.nav.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
		if ev.Key() == tcell.KeyRight {
			c.focusBody()
			return nil
		}
		return ev
	})

	c.body = tview.NewPages()
	c.overview = c.textPage("overview", " Overview ")
	c.buildMachines()
	c.machineTV = c.textPage("machine", " Machine ")
	c.machineTV.SetWrap(true)
	c.machineTV.SetInputCapture(c.machineKeys)
	c.clusterTV = c.textPage("cluster", " Cluster ")
	c.eventsT = tview.NewTable().SetSelectable(true, false).SetFixed(1, 0)
	c.eventsT.SetBorder(true).SetTitle(" Events ")
	c.eventsT.SetSelectedFunc(func(r, _ int) {
		if id, ok := c.eventsT.GetCell(r, 0).GetReference().(string); ok {
			c.openMachine(id, "events")
		}
	})
	c.body.AddPage("events", c.eventsT, true, false)
	c.networkTV = c.textPage("network", " Network ")
	c.imagesTV = c.textPage("images", " Images ")
	c.doctorTV = c.textPage("doctor", " Doctor ")
	c.doctorTV.SetWrap(true).SetWordWrap(true) // a finding and its fix are sentences
	c.accessTV = c.textPage("access", " Access ")
	c.buildRacksAndTags()
	c.osTV = c.textPage("os", " OS images ")
	c.osTV.SetInputCapture(c.osKeys)
	c.buildProfiles()

	main := tview.NewFlex().
		AddItem(c.nav, navWidth, 0, true).
		AddItem(c.body, 0, 1, false)
	layout := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(main, 0, 1, true).
		AddItem(&statusBar{Box: tview.NewBox(), c: c}, 1, 0, false).
		AddItem(&hintBar{Box: tview.NewBox(), hints: c.hints}, 1, 0, false)
	c.root = tview.NewPages().AddPage("main", layout, true, true)
	c.app.SetRoot(c.root, true).SetInputCapture(c.keys)
}

func (c *console) textPage(name, title string) *tview.TextView {
	tv := tview.NewTextView().SetDynamicColors(true).SetWrap(false)
	tv.SetBorder(true).SetTitle(title)
	c.body.AddPage(name, tv, true, false)
	return tv
}

// start shows the first page and starts following the fleet.
func (c *console) start() {
	c.load("cluster") // the status line names the node and the leader
	c.show("overview")
	c.app.SetFocus(c.nav)
	if c.live {
		go c.watch()
		go c.watchNodes()
		go c.followJobs()
	}
}

// navName is the list entry the current page belongs to.
func (c *console) navName() string {
	return navOf(c.page, c.back)
}

func navOf(page, back string) string {
	switch page {
	case "machine":
		return navOf(back, "")
	case "rack":
		return "racks"
	case "tag":
		return "tags"
	case "profile":
		return "profiles"
	}
	return page
}

// show puts a page on the right and loads what it needs.
func (c *console) show(name string) {
	c.page = name
	c.body.SwitchToPage(name)
	for r := 0; r < c.nav.GetRowCount(); r++ {
		if ref, _ := c.nav.GetCell(r, 0).GetReference().(string); ref == c.navName() {
			if sel, _ := c.nav.GetSelection(); sel != r {
				c.nav.Select(r, 0)
			}
		}
	}
	switch name {
	case "overview":
		c.load("cluster", "events", "network", "images")
		if !c.live {
			c.load("machines")
		}
	case "machines":
		if !c.live {
			c.load("machines", "nodes")
		}
	case "machine":
		if !c.live {
			c.load("nodes")
		}
	case "profiles", "profile":
		c.load("profiles")
		if !c.live {
			c.load("nodes", "machines")
		}
	case "events":
		c.load("events")
		if !c.live {
			c.load("machines")
		}
	case "images":
		c.load("images", "cluster")
	case "cluster", "network", "racks", "tags", "doctor", "access":
		c.load(name)
	case "rack":
		c.load("rack:" + c.rack.name)
	case "tag":
		c.load("tag:" + c.tag.name)
		if !c.live {
			c.load("machines")
		}
	case "os":
		c.load("os", "cluster")
	}
	c.render()
}

func (c *console) focusBody() {
	switch c.page {
	case "machines":
		c.app.SetFocus(c.table)
	case "events":
		c.app.SetFocus(c.eventsT)
	case "racks":
		c.app.SetFocus(c.racksT)
	case "rack":
		c.app.SetFocus(c.rackT)
	case "tags":
		c.app.SetFocus(c.tagsT)
	case "profiles":
		c.app.SetFocus(c.profilesT)
	default:
		if p, _ := c.body.GetFrontPage(); p != "" {
			_, prim := c.body.GetFrontPage()
			c.app.SetFocus(prim)
		}
	}
}

// keys are the global keys; a dialog or a text field gets every key.
func (c *console) keys(ev *tcell.EventKey) *tcell.EventKey {
	if c.dialogOn {
		return ev
	}
	if _, typing := c.app.GetFocus().(*tview.InputField); typing {
		return ev
	}
	switch ev.Key() {
	case tcell.KeyRune:
		switch r := ev.Rune(); {
		case r == 'q':
			c.app.Stop()
			return nil
		case r == '?':
			c.showHelp()
			return nil
		case r == 'r':
			c.refresh()
			return nil
		case r >= '0' && r <= '9':
			for i, p := range navPages {
				if navKey(i) == r {
					c.show(p.name)
					c.focusBody()
					return nil
				}
			}
		}
	case tcell.KeyTab, tcell.KeyBacktab:
		if c.nav.HasFocus() {
			c.focusBody()
		} else {
			c.app.SetFocus(c.nav)
		}
		return nil
	case tcell.KeyEscape:
		switch {
		case c.page == "machine":
			c.closeMachine()
		case c.page == "rack" || c.page == "tag" || c.page == "profile":
			c.show(c.navName())
			c.focusBody()
		case !c.nav.HasFocus():
			c.app.SetFocus(c.nav)
		}
		return nil
	}
	return ev
}

// refresh reloads everything the current page shows.
func (c *console) refresh() {
	c.setMsg("refreshing…", false)
	c.load("machines")
	c.show(c.page)
	if c.page == "machine" {
		c.load("machine:" + c.detailID)
	}
}

func (c *console) setMsg(msg string, isErr bool) { c.msg, c.msgErr = msg, isErr }

// load fetches data: in the background when live (the result is applied on
// the event goroutine), at once for Dump.
func (c *console) load(what ...string) {
	for _, w := range what {
		if !c.live {
			c.fetch(c.ctx, w)()
			continue
		}
		go func() {
			apply := c.fetch(c.ctx, w)
			if c.ctx.Err() == nil {
				c.app.QueueUpdateDraw(apply)
			}
		}()
	}
}

const eventLimit = 200

// fetch calls the API off the event goroutine and returns how to apply
// the answer on it.
func (c *console) fetch(ctx context.Context, what string) func() {
	fail := func(err error) func() {
		return func() {
			c.errs[what] = err
			c.setMsg(what+": "+err.Error(), true)
			c.render()
		}
	}
	ok := func(set func()) func() {
		return func() {
			delete(c.errs, what)
			if c.msg == "refreshing…" {
				c.setMsg("", false)
			}
			set()
			c.render()
		}
	}
	switch {
	case what == "machines":
		l, err := c.src.Machines(ctx, 0, 0)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.setMachines(l) })
	case what == "cluster":
		v, err := c.src.Cluster(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.cluster = v })
	case what == "events":
		es, err := c.src.Events(ctx, eventLimit)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.events = es })
	case what == "network":
		n, err := c.src.Network(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.network = n })
	case what == "images":
		im, err := c.src.Images(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.images = im })
	case what == "access":
		ca, err := c.src.CA(ctx)
		if err != nil {
			return fail(err)
		}
		certs, audit, err := c.src.Access(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.access = &accessView{ca: ca, certs: certs, audit: audit} })
	case what == "doctor":
		r, err := c.src.Doctor(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.doctor = &r })
	case what == "racks":
		rs, err := c.src.Racks(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.racks = rs })
	case what == "tags":
		ts, err := c.src.Tags(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.tags = ts })
	case strings.HasPrefix(what, "rack:"):
		name := strings.TrimPrefix(what, "rack:")
		d, err := c.src.Rack(ctx, name)
		return func() {
			if c.rack.name != name {
				return
			}
			c.rack.err = err
			if err == nil {
				c.rack.detail = &d
			}
			c.render()
		}
	case strings.HasPrefix(what, "tag:"):
		name := strings.TrimPrefix(what, "tag:")
		d, err := c.src.Tag(ctx, name)
		return func() {
			if c.tag.name != name {
				return
			}
			c.tag.err = err
			if err == nil {
				c.tag.detail = &d
			}
			c.render()
		}
	case what == "profiles":
		ps, err := c.src.Profiles(ctx)
		if err != nil {
			return fail(err)
		}
		var vars map[string]string
		if cv, can := c.src.(ClusterVarsSource); can {
			if v, err := cv.ClusterVars(ctx); err == nil {
				vars = v.Vars
			}
		}
		return ok(func() { c.setProfiles(ps); c.clusterVars = vars })
	case what == "nodes":
		l, err := c.src.StatelessNodes(ctx, 0, 0)
		if notServed(err) {
			return func() {} // an older API: no stateless nodes
		}
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.setNodes(l) })
	case what == "os":
		l, err := c.src.OS(ctx)
		if err != nil {
			return fail(err)
		}
		return ok(func() { c.osList = l })
	case strings.HasPrefix(what, "machine:"):
		id := strings.TrimPrefix(what, "machine:")
		d, err := c.src.Machine(ctx, id)
		var jobs []wire.Job
		var deploys wire.DeployJobList
		var plan wire.NetworkPlan
		var planErr error
		if err == nil {
			jobs, _ = c.src.Jobs(ctx, d.ID) // a machine without jobs still shows
			deploys, _ = c.src.DeployJobs(ctx, d.ID, 0, 0)
			plan, planErr = c.src.Plan(ctx, d.ID)
		}
		return func() {
			if c.detailID != id {
				return // the operator moved on
			}
			c.detailErr = err
			if err == nil {
				c.detail, c.jobs, c.deployJobs = &d, jobs, deploys.Jobs
				c.plan, c.planErr = &plan, planErr
			}
			c.render()
		}
	}
	return func() {}
}

// watch follows the machines table with blocking queries and applies each
// change as it comes.
func (c *console) watch() {
	var index uint64
	for c.ctx.Err() == nil {
		began := time.Now()
		l, err := c.src.Machines(c.ctx, index, 30*time.Second)
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			c.app.QueueUpdateDraw(func() {
				c.errs["machines"] = err
				c.setMsg("machines: "+err.Error()+" (retrying)", true)
				c.render()
			})
			index = 0
			c.sleep(3 * time.Second)
			continue
		}
		if index == 0 || l.Index != index {
			c.app.QueueUpdateDraw(func() {
				if _, failed := c.errs["machines"]; failed {
					delete(c.errs, "machines")
					c.setMsg("", false)
				}
				c.setMachines(l)
				c.render()
			})
		} else if time.Since(began) < 100*time.Millisecond {
			c.sleep(time.Second) // an API that does not block: do not spin
		}
		index = l.Index
	}
}

func (c *console) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
	case <-t.C:
	}
}

// setMachines takes a new machine list; a change reloads what derives from
// it (recent events, the machine on show).
func (c *console) setMachines(l wire.MachineList) {
	changed := c.haveMach && l.Index != c.machines.Index
	c.machines, c.haveMach = l, true
	known := map[string]bool{}
	for _, m := range l.Machines {
		known[m.ID] = true
	}
	for id := range c.selected {
		if !known[id] {
			delete(c.selected, id)
		}
	}
	if !changed || !c.live {
		return
	}
	if c.page == "events" || c.page == "overview" {
		c.load("events")
	}
	switch c.page {
	case "machine":
		c.load("machine:" + c.detailID)
	case "racks", "tags":
		c.load(c.page) // a placement or a tag moves their counts
	case "profiles", "profile":
		c.load("profiles")
	case "rack":
		c.load("rack:" + c.rack.name)
	case "tag":
		c.load("tag:" + c.tag.name)
	}
}

// render redraws the widgets from the data (the screen follows on the next
// draw).
func (c *console) render() {
	switch c.page {
	case "overview":
		c.renderOverview()
	case "machines":
		c.fillMachines()
	case "machine":
		c.renderMachine()
	case "cluster":
		c.renderCluster()
	case "events":
		c.renderEvents()
	case "network":
		c.renderNetwork()
	case "images":
		c.renderImages()
	case "doctor":
		c.renderDoctor()
	case "access":
		c.renderAccess()
	case "racks":
		c.renderRacks()
	case "rack":
		c.renderRack()
	case "tags":
		c.renderTags()
	case "tag":
		c.renderTag()
	case "os":
		c.renderOS()
	case "profiles":
		c.renderProfiles()
	case "profile":
		c.renderProfile()
	}
}
