package appliance

import (
	"bytes"
	"crypto/x509"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// Boot scripts replace the reference's per-MAC pxelinux files: every node
// renders a machine's iPXE script on request from replicated state.

//go:embed templates/boot.ipxe
var defaultTemplates embed.FS

// defaultCommissionImage is the image commissioning boots unless the
// configuration names another (commission_image).
const defaultCommissionImage = "commissioning"

// BootData is what the boot template sees. Fields are documented in
// templates/boot.ipxe.
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
}

// loadBootTemplate parses the embedded template, or the operator's
// DATA/templates/boot.ipxe when present. It runs once at start.
func loadBootTemplate(dataDir string) (*template.Template, error) {
	src, err := defaultTemplates.ReadFile("templates/boot.ipxe")
	if err != nil {
		return nil, err
	}
	name := "embedded boot.ipxe"
	override := filepath.Join(dataDir, "templates", "boot.ipxe")
	if b, err := os.ReadFile(override); err == nil {
		src, name = b, override
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("boot template %s: %w", override, err)
	}
	t, err := template.New("boot.ipxe").Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, fmt.Errorf("boot template %s: %w", name, err)
	}
	// Render every action once so that a broken override fails at start,
	// not when a machine boots.
	for _, a := range []string{"commission", "poweroff", "local", "wait"} {
		if err := t.Execute(new(bytes.Buffer), BootData{Action: a, MAC: "52:54:00:00:00:01"}); err != nil {
			return nil, fmt.Errorf("boot template %s (action %s): %w", name, a, err)
		}
	}
	return t, nil
}

// bootAction decides what a machine in a state boots: unknown, new and
// commissioning machines (and those whose re-commission was asked for, which
// puts them back in new) run the commissioning image; ready ones power off;
// every other state boots from its local disk.
func bootAction(known bool, state string) string {
	switch {
	case !known, state == store.StateNew, state == store.StateCommissioning:
		return "commission"
	case state == store.StateReady:
		return "poweroff"
	}
	return "local"
}

// getBootIPXE serves GET /boot/ipxe?mac=…, unauthenticated: a machine asks
// before it has any credential.
func (n *Node) getBootIPXE(c *gin.Context) {
	mac, err := store.NormalizeMAC(c.Query("mac"))
	if err != nil {
		n.bootRefused.Inc()
		c.String(http.StatusBadRequest, "#!ipxe\necho Rollcall: mac must be a MAC address\nexit 1\n")
		return
	}
	data := BootData{MAC: mac}
	var machine store.Machine
	var agentToken, imageName string
	imageName = n.conf.CommissionImage
	if imageName == "" {
		imageName = defaultCommissionImage
	}
	var image store.Image
	var imageErr error
	err = n.db.View(func(tx *store.Tx) error {
		if ids := tx.MachineIDsByMAC(mac); len(ids) > 0 {
			var err error
			if machine, err = tx.Machine(ids[0]); err != nil {
				return err
			}
		}
		image, imageErr = tx.Image(imageName)
		id, err := tx.Identity()
		if err != nil {
			return err
		}
		tok, err := n.key.Open(id.SealedAgentToken, []byte(aadAgentToken))
		if err != nil {
			return err
		}
		agentToken = string(tok)
		return nil
	})
	if err != nil {
		n.log.Error("boot script: cannot read state", "mac", mac, "err", err)
		c.String(http.StatusServiceUnavailable, "#!ipxe\necho Rollcall: node not ready\nsleep 10\nchain --autofree http://%s/boot/ipxe?mac=${mac}\n", c.Request.Host)
		return
	}
	data.Machine, data.State = machine.ID, machine.State
	data.Action = bootAction(machine.ID != "", machine.State)
	base := "http://" + c.Request.Host
	data.Retry = base + "/boot/ipxe?mac=${mac}"
	if data.Action == "commission" || data.Action == "poweroff" {
		if imageErr != nil {
			data.Action = "wait"
			data.Message = fmt.Sprintf("no image %q yet: import one with rollcall image import %s -kernel F -initrd F", imageName, imageName)
		} else {
			data.Kernel = base + "/images/" + image.Name + "/kernel"
			data.Initrd = base + "/images/" + image.Name + "/initrd"
			data.Args = n.agentArgs(base, c.Request.Host, agentToken)
		}
	}
	var buf bytes.Buffer
	if err := n.bootTmpl.Execute(&buf, data); err != nil {
		n.log.Error("boot script: template failed", "mac", mac, "err", err)
		c.String(http.StatusInternalServerError, "#!ipxe\necho Rollcall: boot template failed; see the node's log\nexit 1\n")
		return
	}
	n.log.Debug("boot script", "mac", mac, "machine", machine.ID, "action", data.Action)
	c.Data(http.StatusOK, "text/plain; charset=utf-8", buf.Bytes())
}

// agentArgs is the kernel command line the commissioning agent reads.
func (n *Node) agentArgs(base, host, token string) string {
	args := []string{"rollcall.server=" + base, "rollcall.token=" + token}
	if n.HTTPSAddr() != "" {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		_, port, _ := net.SplitHostPort(n.HTTPSAddr())
		args = append(args, "rollcall.tls=https://"+net.JoinHostPort(h, port))
	}
	if ca, err := x509.ParseCertificate(n.caCert); err == nil {
		args = append(args, "rollcall.ca="+pki.FingerprintHex(ca))
	}
	if a := strings.TrimSpace(n.conf.CommissionAppend); a != "" {
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
