package appliance

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// maxInventoryBytes bounds a commission upload: the largest machines of the
// fleet simulator are 72 KB (inventory.CheckLimits bounds every field).
const maxInventoryBytes = inventory.MaxDocument

// maxEnlistMACs bounds the MACs an enlist may name (as nics in a report).
const maxEnlistMACs = 512

// identityOf builds the identity the state machine resolves, from reported
// fields; MACs must already be normalised.
//
// MACs no NIC can own (all zeros, multicast: some virtual interfaces report
// them) are left out of the identity; a boot MAC of that kind is refused by
// the state machine.
func identityOf(uuid, serial, bootMAC string, macs []string) raftfsm.Identity {
	var own []string
	for _, m := range macs {
		if store.CheckMachineMAC(m) == nil {
			own = append(own, m)
		}
	}
	id := raftfsm.Identity{Key: inventory.Key(uuid, serial, bootMAC), BootMAC: bootMAC, MACs: own}
	if inventory.RealUUID(uuid) {
		id.UUID = inventory.NormalizeUUID(uuid)
	}
	if inventory.RealSerial(serial) {
		id.Serial = strings.TrimSpace(serial)
	}
	return id
}

func (n *Node) postEnlist(c *gin.Context) {
	var req wire.EnlistRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	if err := checkEnlist(req); err != nil {
		n.fail(c, err)
		return
	}
	boot := ""
	if req.BootMAC != "" {
		m, err := store.NormalizeMAC(req.BootMAC)
		if err != nil {
			n.fail(c, err)
			return
		}
		boot = m
	}
	if am := agentMAC(c); am != "" {
		if boot != "" && boot != am {
			n.fail(c, &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: "boot_mac " + boot + " is not the MAC this boot token was handed to (" + am + ")"})
			return
		}
		boot = am
	}
	var macs []string
	for _, raw := range req.MACs {
		m, err := store.NormalizeMAC(raw)
		if err != nil {
			n.fail(c, err)
			return
		}
		macs = append(macs, m)
	}
	if req.SystemUUID != "" && inventory.NormalizeUUID(req.SystemUUID) == "" {
		n.fail(c, badRequest("system_uuid %q is not a UUID", clip(req.SystemUUID)))
		return
	}
	id := identityOf(req.SystemUUID, req.Serial, boot, macs)
	newID := newMachineID()
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.MachineEnlist{NewID: newID, Identity: id, Node: n.opts.Name, Now: time.Now().UTC(), AgentMAC: agentMAC(c)})
	if err != nil {
		n.fail(c, err)
		return
	}
	m, err := n.machineByIdentity(id, newID)
	if err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.EnlistReply{ID: m.ID, State: m.State, Index: idx})
}

// checkEnlist holds an enlist to the limits of a report's same fields.
func checkEnlist(req wire.EnlistRequest) error {
	for _, f := range [][2]string{{"system_uuid", req.SystemUUID}, {"serial", req.Serial}, {"boot_mac", req.BootMAC}} {
		if err := inventory.CheckText(f[0], f[1], false); err != nil {
			return badRequest("%v", err)
		}
	}
	if len(req.MACs) > maxEnlistMACs {
		return badRequest("macs: %d entries is more than the %d allowed", len(req.MACs), maxEnlistMACs)
	}
	return nil
}

// machineByIdentity reads back the machine an applied enlist or commission
// resolved to.
func (n *Node) machineByIdentity(id raftfsm.Identity, newID string) (store.Machine, error) {
	var m store.Machine
	err := n.db.View(func(tx *store.Tx) error {
		if mm, err := tx.Machine(newID); err == nil {
			m = mm
			return nil
		}
		if id.Key != "" {
			if ids := tx.MachineIDsByKey(id.Key); len(ids) > 0 {
				var err error
				m, err = tx.Machine(ids[0])
				return err
			}
		}
		for _, mac := range append([]string{id.BootMAC}, id.MACs...) {
			if ids := tx.MachineIDsByMAC(mac); len(ids) > 0 {
				var err error
				m, err = tx.Machine(ids[0])
				return err
			}
		}
		return store.Errorf(store.ErrNotFound, "machine for %s", id.Key)
	})
	return m, err
}

func (n *Node) postCommission(c *gin.Context) {
	var rep inventory.Report
	if err := decodeBody(c, maxInventoryBytes, &rep); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.Status == http.StatusRequestEntityTooLarge {
			ae.Message = fmt.Sprintf("inventory is larger than the %d MiB allowed", maxInventoryBytes>>20)
		}
		n.fail(c, err)
		return
	}
	if am := agentMAC(c); rep.BootMAC == "" {
		rep.BootMAC = am
	}
	cmd, err := n.commissionCommand(&rep, agentMAC(c))
	if err != nil {
		n.fail(c, err)
		return
	}
	idx, err := n.cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		n.fail(c, err)
		return
	}
	m, err := n.machineByIdentity(cmd.Identity, cmd.NewID)
	if err != nil {
		n.fail(c, err)
		return
	}
	n.log.Info("machine commissioned", "machine", m.ID, "key", cmd.Identity.Key, "index", idx)
	go n.queueDetect(n.background(), m.ID)
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.CommissionReply{ID: m.ID, State: m.State, Index: idx})
}

// commissionCommand validates a report and turns it into a command: the BMC
// password is sealed and removed from the stored document before anything
// leaves this function.
//
// agentMAC is the MAC of the boot token the upload came with ("" for
// an operator's shared agent token): the report's boot MAC must be it.
func (n *Node) commissionCommand(rep *inventory.Report, agentMAC string) (*raftfsm.Commission, error) {
	if err := inventory.Validate(rep); err != nil {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "invalid_inventory", Message: "inventory rejected: " + strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	if agentMAC != "" && rep.BootMAC != agentMAC {
		return nil, &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: "boot_mac " + rep.BootMAC + " is not the MAC this boot token was handed to (" + agentMAC + ")"}
	}
	newID := newMachineID()
	var bmc *raftfsm.BMC
	if rep.BMC != nil {
		bmc = &raftfsm.BMC{
			Driver: rep.BMC.Driver, Address: rep.BMC.Address, MAC: rep.BMC.MAC, User: rep.BMC.User,
			Source: rep.BMC.Source, Errors: rep.BMC.Errors,
		}
		if rep.BMC.Channel != 0 || rep.BMC.UserID != 0 {
			bmc.Settings = map[string]string{"channel": strconv.Itoa(rep.BMC.Channel), "user_id": strconv.Itoa(rep.BMC.UserID)}
		}
		if rep.BMC.Password != "" {
			// The sealed secret is bound to the machine it belongs to; the
			// ID is only known after resolution, so bind to the identity key.
			aad := bmcAAD(aadBMCAgent+identityKeyOf(rep), rep.BMC.Address)
			sealed, err := n.key.Seal([]byte(rep.BMC.Password), []byte(aad))
			if err != nil {
				return nil, err
			}
			bmc.PasswordSealed, bmc.PasswordAAD = sealed, aad
		}
		rep.BMC.Password = ""
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	// Compressed once here; the log, replication and every store carry the
	// small form (store.CompressDocument).
	doc, err := store.CompressDocument(raw)
	if err != nil {
		return nil, err
	}
	macs := inventory.MACs(rep)
	boot := rep.BootMAC
	if boot == "" && len(macs) > 0 {
		boot = macs[0]
	}
	var ips []string
	for _, nic := range rep.NICs {
		for _, ip := range nic.IPs {
			if p := net.ParseIP(ip); p != nil {
				ips = append(ips, p.String())
			}
		}
	}
	return &raftfsm.Commission{
		NewID:     newID,
		Identity:  identityOf(rep.System.UUID, rep.System.Serial, boot, macs),
		IPs:       dedupe(ips),
		Summary:   raftfsm.SummaryBody(inventory.Summarize(rep)),
		Inventory: doc,
		BMC:       bmc,
		Node:      n.opts.Name,
		Now:       time.Now().UTC(),
		AgentMAC:  agentMAC,
	}, nil
}

func identityKeyOf(rep *inventory.Report) string {
	boot := rep.BootMAC
	if boot == "" && len(rep.NICs) > 0 {
		boot = rep.NICs[0].MAC
	}
	return inventory.Key(rep.System.UUID, rep.System.Serial, boot)
}

// bmcAAD is what a BMC password is sealed to: the record it belongs to and
// the address it was made for. A password opens only for that address
// (openBMCPassword): moved to another, it is never sent.
func bmcAAD(owner, address string) string { return owner + "@" + address }

// openBMCPassword opens a BMC's sealed password for use against its current
// address. Seals older than the address binding (no "@") open as before:
// the state machine drops a password whenever the address changes.
func (n *Node) openBMCPassword(b store.BMC) (string, error) {
	if i := strings.LastIndexByte(b.PasswordAAD, '@'); i >= 0 && b.PasswordAAD[i+1:] != b.Address {
		return "", errors.New("the BMC password was set for another address: set it again (rollcall bmc ID -password -)")
	}
	pw, err := n.key.Open(b.PasswordSealed, []byte(b.PasswordAAD))
	if err != nil {
		return "", errors.New("cannot open the sealed BMC password on this node")
	}
	return string(pw), nil
}

// BMC hints carry passwords, so only the booted machine may ask, only for
// its own MACs, a few at a time and a few times a minute.
const (
	maxHintMACs     = 8
	hintsPerMinute  = 10
	hintLimiterKeys = 65536
)

// getBMCHint is GET /api/v1/bmc-hint?macs=a,b, with a boot token: the MACs
// must be the token's own MAC or MACs of the machine that owns it.
func (n *Node) getBMCHint(c *gin.Context) {
	am := agentMAC(c)
	raw := c.Query("macs")
	if raw == "" {
		n.fail(c, badRequest("macs is required: a comma-separated list of the machine's MACs"))
		return
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxHintMACs {
		n.fail(c, badRequest("macs: %d MACs is more than the %d a hint may ask for", len(parts), maxHintMACs))
		return
	}
	if !n.hintLimiter.allow(am, time.Now()) {
		n.fail(c, &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited", Message: fmt.Sprintf("at most %d BMC hints a minute for one machine; retry later", hintsPerMinute)})
		return
	}
	own := map[string]bool{am: true}
	n.db.View(func(tx *store.Tx) error {
		for _, id := range tx.MachineIDsByMAC(am) {
			if m, err := tx.Machine(id); err == nil {
				for _, mac := range m.MACs {
					own[mac] = true
				}
			}
		}
		return nil
	})
	for _, s := range parts {
		mac, err := store.NormalizeMAC(s)
		if err != nil {
			n.fail(c, err)
			return
		}
		if !own[mac] {
			n.fail(c, &apiError{Status: http.StatusForbidden, Code: "forbidden", Message: mac + " is not a MAC of the machine this boot token was handed to"})
			return
		}
		if h, ok := n.conf.BMCHints[mac]; ok {
			c.JSON(http.StatusOK, wire.BMCHintReply{MAC: mac, Driver: h.Driver, Address: h.Address, User: h.User, Password: h.Password})
			return
		}
	}
	n.fail(c, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no bmc_hints entry for these MACs"})
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// commissionExample is the request body shown in the OpenAPI document.
func commissionExample() inventory.Report {
	return inventory.Report{Version: inventory.SchemaVersion}
}
