package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/rollcall/rollcall/appliance/pki"
)

// Interface is a network interface the setup offers for management.
type Interface struct {
	Name  string
	MAC   string
	Addrs []netip.Prefix
}

// SetupChoices are what the operator chose on first boot. The caller
// configures the address and starts the node with them.
type SetupChoices struct {
	Name      string       `json:"name"`      // node name, a DNS label
	Interface string       `json:"interface"` // management interface
	Address   netip.Prefix `json:"address"`   // its address, ADDRESS/BITS
	Cluster   string       `json:"cluster"`   // "new" or "join"
	Join      string       `json:"-"`         // the join code when joining (one-time, never written)
}

// SetupOptions configure the first-boot setup.
type SetupOptions struct {
	DataDir  string // the node's data directory; setup.json is written there
	Hostname string // the name offered; default the host name
	// Interfaces lists the interfaces to offer (default SystemInterfaces).
	Interfaces func() ([]Interface, error)
	// Start starts the node with the choices and returns the web UI's
	// address, which the setup then shows. Nil: Setup returns the choices
	// right away.
	Start func(ctx context.Context, ch SetupChoices) (webURL string, err error)
	// CheckName is the rule the node holds its name to (the appliance
	// passes store.ValidName), so that the form refuses what the node
	// would; nil leaves the name to the node's own start.
	CheckName func(string) error
	Screen    tcell.Screen // nil: the process's terminal
}

// ErrSetupQuit is returned when the operator leaves the setup.
var ErrSetupQuit = errors.New("setup: quit before the node was set up")

const setupFile = "setup.json"

// NeedsSetup reports whether a data directory has never held a node: no
// state database yet.
func NeedsSetup(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "state.db"))
	return errors.Is(err, os.ErrNotExist)
}

// SystemInterfaces lists the host's interfaces that are up, not loopback,
// and have a hardware address.
func SystemInterfaces() ([]Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []Interface
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 || len(ifc.HardwareAddr) == 0 {
			continue
		}
		it := Interface{Name: ifc.Name, MAC: ifc.HardwareAddr.String()}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ip, _ := netip.AddrFromSlice(n.IP)
				bits, _ := n.Mask.Size()
				if ip = ip.Unmap(); !ip.IsLinkLocalUnicast() {
					it.Addrs = append(it.Addrs, netip.PrefixFrom(ip, bits))
				}
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// Setup runs the first-boot setup: the node's name, the management
// interface and its address, then a new cluster or joining one with a code.
// It records the choices (without the code) in DataDir/setup.json, calls
// Start if given and shows the web UI's address it returns.
func Setup(ctx context.Context, o SetupOptions) (SetupChoices, error) {
	list := o.Interfaces
	if list == nil {
		list = SystemInterfaces
	}
	ifs, err := list()
	if err != nil {
		return SetupChoices{}, err
	}
	if len(ifs) == 0 {
		return SetupChoices{}, errors.New("setup: no network interface is up; connect the management network and try again")
	}
	prev := readSetup(o.DataDir)
	if prev.Name == "" {
		prev.Name = o.Hostname
		if prev.Name == "" {
			h, _ := os.Hostname()
			prev.Name = strings.ToLower(strings.Split(h, ".")[0])
		}
	}
	parent := ctx // the node Start starts outlives the setup's screen
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
	s := &setup{ctx: parent, app: app, o: o, ifs: ifs, err: ErrSetupQuit}
	s.form(prev)
	if err := app.Run(); err != nil {
		return SetupChoices{}, err
	}
	if s.err != nil && ctx.Err() != nil {
		return SetupChoices{}, ctx.Err()
	}
	return s.done, s.err
}

type setup struct {
	ctx  context.Context // the caller's: Start's node must outlive Setup
	app  *tview.Application
	o    SetupOptions
	ifs  []Interface
	done SetupChoices
	err  error
}

func readSetup(dir string) SetupChoices {
	var ch SetupChoices
	if b, err := os.ReadFile(filepath.Join(dir, setupFile)); err == nil {
		json.Unmarshal(b, &ch) // a bad file only loses the defaults
	}
	return ch
}

func (s *setup) form(prev SetupChoices) {
	f := tview.NewForm()
	status := tview.NewTextView().SetDynamicColors(true)
	var options []string
	ifIndex := 0
	for i, it := range s.ifs {
		var addrs []string
		for _, a := range it.Addrs {
			addrs = append(addrs, a.String())
		}
		options = append(options, fmt.Sprintf("%-10s %s %s", it.Name, it.MAC, strings.Join(addrs, " ")))
		if it.Name == prev.Interface {
			ifIndex = i
		}
	}
	addr := tview.NewInputField().SetLabel("Address (ADDRESS/BITS)").SetFieldWidth(24)
	if prev.Address.IsValid() {
		addr.SetText(prev.Address.String())
	}
	suggest := func(i int) {
		if i < 0 || i >= len(s.ifs) {
			return
		}
		for _, a := range s.ifs[i].Addrs {
			if a.Addr().Is4() {
				addr.SetText(a.String())
				return
			}
		}
	}
	if addr.GetText() == "" {
		suggest(ifIndex)
	}
	name := tview.NewInputField().SetLabel("Node name").SetText(prev.Name).SetFieldWidth(24)
	ifDrop := tview.NewDropDown().SetLabel("Management interface").SetOptions(options, nil).SetCurrentOption(ifIndex)
	ifDrop.SetSelectedFunc(func(_ string, i int) { suggest(i) })
	clusterDrop := tview.NewDropDown().SetLabel("Cluster").
		SetOptions([]string{"Create a new cluster", "Join a cluster with a code"}, nil)
	if prev.Cluster == "join" {
		clusterDrop.SetCurrentOption(1)
	} else {
		clusterDrop.SetCurrentOption(0)
	}
	code := tview.NewInputField().SetLabel("Join code").SetFieldWidth(40).
		SetPlaceholder("from `rollcall cluster join-code` on a member")
	f.AddFormItem(name).AddFormItem(ifDrop).AddFormItem(addr).AddFormItem(clusterDrop).AddFormItem(code)
	f.AddButton("Start", func() {
		i, _ := ifDrop.GetCurrentOption()
		mode, _ := clusterDrop.GetCurrentOption()
		ch, err := s.check(name.GetText(), i, addr.GetText(), mode == 1, code.GetText())
		if err != nil {
			status.SetText(" [red]" + esc(err.Error()) + "[-]")
			return
		}
		if err := writeSetup(s.o.DataDir, ch); err != nil {
			status.SetText(" [red]" + esc(err.Error()) + "[-]")
			return
		}
		s.start(ch)
	})
	f.AddButton("Quit", func() { s.app.Stop() })
	f.SetBorder(true).SetTitle(" Rollcall: set up this appliance ")
	intro := tview.NewTextView().SetText(" Choose the interface on the management network and its address, then\n" +
		" create a new cluster or join one with a code from a member.")
	page := tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(intro, 3, 0, false).
		AddItem(f, 15, 0, true).
		AddItem(status, 2, 0, false)
	s.app.SetRoot(center(page, 78, 20), true).SetFocus(f)
}

// check validates the form; every refusal says what is wanted.
func (s *setup) check(name string, ifIndex int, addr string, join bool, code string) (SetupChoices, error) {
	ch := SetupChoices{Name: strings.TrimSpace(name), Cluster: "new"}
	if s.o.CheckName != nil {
		if err := s.o.CheckName(ch.Name); err != nil {
			return ch, fmt.Errorf("node name: %w", err)
		}
	}
	if ifIndex < 0 || ifIndex >= len(s.ifs) {
		return ch, errors.New("management interface: choose one")
	}
	ch.Interface = s.ifs[ifIndex].Name
	p, err := netip.ParsePrefix(strings.TrimSpace(addr))
	if err != nil {
		return ch, fmt.Errorf("address %q: want ADDRESS/BITS such as 10.0.0.5/24", addr)
	}
	if a := p.Addr(); a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || p.Bits() == 0 {
		return ch, fmt.Errorf("address %s: not usable for management (loopback, unspecified, multicast or /0)", p)
	}
	ch.Address = p
	if join {
		ch.Cluster = "join"
		ch.Join = strings.TrimSpace(code)
		if ch.Join == "" {
			return ch, errors.New("join code: required to join a cluster (rollcall cluster join-code on a member)")
		}
		if _, err := pki.ParseJoinCode(ch.Join); err != nil {
			return ch, fmt.Errorf("join code: %w", err)
		}
	}
	return ch, nil
}

// writeSetup records the choices, minus the join code, with mode 0600.
func writeSetup(dir string, ch SetupChoices) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	b, _ := json.MarshalIndent(ch, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, setupFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// start hands the choices to the caller and shows the web UI's address.
func (s *setup) start(ch SetupChoices) {
	if s.o.Start == nil {
		s.done, s.err = ch, nil
		s.app.Stop()
		return
	}
	what := "creating a new cluster"
	if ch.Cluster == "join" {
		what = "joining the cluster"
	}
	msg := tview.NewTextView().SetDynamicColors(true).
		SetText(fmt.Sprintf("\n Starting node %s on %s (%s), %s…", ch.Name, ch.Address, ch.Interface, what))
	msg.SetBorder(true).SetTitle(" Rollcall ")
	s.app.SetRoot(center(msg, 78, 7), true)
	go func() {
		url, err := s.o.Start(s.ctx, ch)
		s.app.QueueUpdateDraw(func() {
			if err != nil {
				m := tview.NewModal().SetText("The node did not start:\n\n" + err.Error()).AddButtons([]string{"Back"})
				m.SetDoneFunc(func(int, string) { s.form(ch) })
				s.app.SetRoot(m, true).SetFocus(m)
				return
			}
			s.done, s.err = ch, nil
			done := tview.NewTextView().SetDynamicColors(true).SetText(fmt.Sprintf(
				"\n [green]Rollcall is running.[-]\n\n Web UI: [::b]%s[::-]\n\n Open it from a machine on the management network.\n"+
					" The admin token is in %s on this appliance.\n\n Press Enter to finish.",
				esc(url), esc(filepath.Join(s.o.DataDir, "admin.token"))))
			done.SetBorder(true).SetTitle(" Rollcall: set up ")
			done.SetInputCapture(func(ev *tcell.EventKey) *tcell.EventKey {
				if ev.Key() == tcell.KeyEnter || ev.Key() == tcell.KeyEscape {
					s.app.Stop()
					return nil
				}
				return ev
			})
			s.app.SetRoot(center(done, 78, 12), true).SetFocus(done)
		})
	}()
}
