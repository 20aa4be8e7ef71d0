package bootfiles

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/rollcall/rollcall/store"
)

// Boot scripts replace the reference's per-MAC pxelinux files: every node
// renders a machine's iPXE script on request from replicated state (and,
// on VLANs whose NICs cannot run iPXE, its pxelinux.cfg file: pxelinux.go).

//go:embed templates/boot.ipxe templates/pxelinux.cfg
var defaultTemplates embed.FS

// defaultCommissionImage is the image commissioning boots unless the
// configuration names another (commission_image).
const defaultCommissionImage = "commissioning"

// BootData is what the boot templates see. Fields are documented in
// templates/boot.ipxe and templates/pxelinux.cfg.
type BootData struct {
	Action  string
	MAC     string
	Machine string
	State   string
	Kernel  string
	Initrd  string
	Args    string
	Message string
	Retry   string
	Job     string // the deploy or release job (Action deploy)
	Node    string // the stateless node's name (Action stateless)
	Profile string // its profile (Action stateless)
}

// Templates are the boot templates, parsed once at start.
type Templates struct {
	ipxe, pxelinux *template.Template
}

// LoadTemplates parses the embedded iPXE script and pxelinux.cfg
// templates, or the operator's DATA/templates/boot.ipxe and
// DATA/templates/pxelinux.cfg where present. A node loads them before it
// touches its data directory, so that a broken override stops it first.
func LoadTemplates(dataDir string) (*Templates, error) {
	ipxe, err := loadTemplate(dataDir, "boot.ipxe")
	if err != nil {
		return nil, err
	}
	pxelinux, err := loadTemplate(dataDir, "pxelinux.cfg")
	if err != nil {
		return nil, err
	}
	return &Templates{ipxe: ipxe, pxelinux: pxelinux}, nil
}

// loadTemplate parses templates/NAME, embedded or overridden by
// DATA/templates/NAME, and renders every action once so that a broken
// override fails at start, not when a machine boots.
func loadTemplate(dataDir, name string) (*template.Template, error) {
	src, err := defaultTemplates.ReadFile("templates/" + name)
	if err != nil {
		return nil, err
	}
	from := "embedded " + name
	override := filepath.Join(dataDir, "templates", name)
	if b, err := os.ReadFile(override); err == nil {
		src, from = b, override
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("boot template %s: %w", override, err)
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("boot template %s: %w", from, err)
	}
	for _, a := range []string{"commission", "deploy", "stateless", "poweroff", "local", "wait"} {
		if err := t.Execute(new(bytes.Buffer), BootData{Action: a, MAC: "52:54:00:00:00:01"}); err != nil {
			return nil, fmt.Errorf("boot template %s (action %s): %w", from, a, err)
		}
	}
	return t, nil
}

// bootAction decides what a machine in a state boots: unknown, new and
// commissioning machines (and those whose re-commission was asked for, which
// puts them back in new) run the commissioning image; ready ones power off;
// deploying and releasing ones run the agent in deploy mode with their
// job's token; stateless nodes (stateless, booted) boot their profile's
// image into RAM; every other state (deployed, deploy-failed) boots from
// its local disk.
func bootAction(known bool, state string) string {
	switch {
	case !known, state == store.StateNew, state == store.StateCommissioning:
		return "commission"
	case state == store.StateReady:
		return "poweroff"
	case state == store.StateDeploying, state == store.StateReleasing:
		return "deploy"
	case state == store.StateStateless, state == store.StateBooted:
		return "stateless"
	}
	return "local"
}

// bootFor decides what the machine with MAC mac boots, for a client that
// reaches this node's HTTP server at host (HOST[:PORT]): the action, and the
// commissioning image's kernel and initrd URLs with the agent's kernel
// arguments when the action boots it. Powering off boots it too unless the
// loader can power off by itself (selfPoweroff). Without the image such a
// machine is told to wait (Message says why). Both loaders share it, so an
// iPXE script and a pxelinux file always agree.
func (s *Server) bootFor(mac, host string, selfPoweroff bool) (BootData, error) {
	data := BootData{MAC: mac}
	imageName := s.conf.CommissionImage
	var machine store.Machine
	var image store.Image
	var imageErr error
	var job store.DeployJob
	var hasJob bool
	var sl statelessBoot
	err := s.conf.DB.View(func(tx *store.Tx) error {
		if ids := tx.MachineIDsByMAC(mac); mac != "" && len(ids) > 0 {
			var err error
			if machine, err = tx.Machine(ids[0]); err != nil {
				return err
			}
			if job, hasJob, err = tx.ActiveDeployJob(machine.ID); err != nil {
				return err
			}
			sl = readStatelessBoot(tx, machine.ID)
		}
		image, imageErr = tx.Image(imageName)
		return nil
	})
	if err != nil {
		return data, err
	}
	data.Machine, data.State = machine.ID, machine.State
	data.Action = bootAction(machine.ID != "", machine.State)
	if data.Action == "deploy" && !hasJob {
		// Deploying without a job (cancelled between the read of the
		// state and now cannot happen in one transaction; a record from a
		// damaged store can): wait rather than guess.
		data.Action, data.Message = "wait", fmt.Sprintf("machine %s is %s but has no job", machine.ID, machine.State)
		return data, nil
	}
	if data.Action == "deploy" {
		data.Job = job.ID
	}
	if data.Action == "stateless" {
		return s.statelessBoot(data, sl, host)
	}
	if data.Action == "commission" || data.Action == "deploy" || data.Action == "poweroff" && !selfPoweroff {
		if imageErr != nil {
			data.Action = "wait"
			data.Message = fmt.Sprintf("no image %q yet: import one with rollcall image import %s -kernel F -initrd F", imageName, imageName)
		} else {
			base := "http://" + host
			data.Kernel = base + "/images/" + image.Name + "/kernel"
			data.Initrd = base + "/images/" + image.Name + "/initrd"
			// Only a commissioning run gets a token, bound to this MAC: the
			// agent that powers a machine off calls nothing. Without a MAC
			// (pxelinux's default file for an address no lease names) there
			// is nothing to bind it to: that agent cannot enlist.
			token := ""
			if (data.Action == "commission" || data.Action == "deploy") && mac != "" {
				if token, err = s.conf.BootToken(mac); err != nil {
					return data, err
				}
			}
			data.Args = s.agentArgs(base, host, token)
			if data.Action == "deploy" {
				// The boot token stays: it ties the agent to this MAC,
				// and the API checks it belongs to the job's machine.
				jt, err := s.conf.JobToken(job.ID)
				if err != nil {
					return data, err
				}
				data.Args += " rollcall.mode=deploy rollcall.job=" + jt
			}
		}
	}
	return data, nil
}

// ServeIPXE serves GET /boot/ipxe?mac=…, unauthenticated: a machine asks
// before it has any credential. Every answer is an iPXE script, even a
// refusal, so that the firmware shows the reason.
func (s *Server) ServeIPXE(w http.ResponseWriter, r *http.Request) {
	script := func(status int, format string, a ...any) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, format, a...)
	}
	mac, err := store.NormalizeMAC(r.URL.Query().Get("mac"))
	if err != nil {
		s.m.BootRefused.Inc()
		script(http.StatusBadRequest, "#!ipxe\necho Rollcall: mac must be a MAC address\nexit 1\n")
		return
	}
	data, err := s.bootFor(mac, r.Host, false)
	if err == nil {
		err = s.conf.Diverged()
	}
	if err != nil {
		s.log.Error("boot script: cannot read state", "mac", mac, "err", err)
		script(http.StatusServiceUnavailable, "#!ipxe\necho Rollcall: node not ready\nsleep 10\nchain --autofree http://%s/boot/ipxe?mac=${mac}\n", r.Host)
		return
	}
	data.Retry = "http://" + r.Host + "/boot/ipxe?mac=${mac}"
	var buf bytes.Buffer
	if err := s.conf.Templates.ipxe.Execute(&buf, data); err != nil {
		s.log.Error("boot script: template failed", "mac", mac, "err", err)
		script(http.StatusInternalServerError, "#!ipxe\necho Rollcall: boot template failed; see the node's log\nexit 1\n")
		return
	}
	s.log.Debug("boot script", "mac", mac, "machine", data.Machine, "action", data.Action)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

// agentArgs is the kernel command line the commissioning agent reads.
func (s *Server) agentArgs(base, host, token string) string {
	args := []string{"rollcall.server=" + base}
	if token != "" {
		args = append(args, "rollcall.token="+token)
	}
	args = append(args, s.tlsArgs(host)...)
	if a := strings.TrimSpace(s.conf.CommissionAppend); a != "" {
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
