package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/raftfsm/cluster"
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

func (s *Server) postEnlist(c *gin.Context) error {
	var req wire.EnlistRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if err := checkEnlist(req); err != nil {
		return err
	}
	boot := ""
	if req.BootMAC != "" {
		m, err := store.NormalizeMAC(req.BootMAC)
		if err != nil {
			return err
		}
		boot = m
	}
	if am := agentMAC(c); am != "" {
		if boot != "" && boot != am {
			return Errorf(http.StatusForbidden, "forbidden", "boot_mac %s is not the MAC this boot token was handed to (%s)", boot, am)
		}
		boot = am
	}
	var macs []string
	for _, raw := range req.MACs {
		m, err := store.NormalizeMAC(raw)
		if err != nil {
			return err
		}
		macs = append(macs, m)
	}
	if req.SystemUUID != "" && inventory.NormalizeUUID(req.SystemUUID) == "" {
		return BadRequest("system_uuid %q is not a UUID", store.Clip(req.SystemUUID))
	}
	id := identityOf(req.SystemUUID, req.Serial, boot, macs)
	newID := newMachineID()
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MachineEnlist{NewID: newID, Identity: id, Node: s.cfg.Name, Now: time.Now().UTC(), AgentMAC: agentMAC(c)})
	if err != nil {
		return err
	}
	m, err := s.machineByIdentity(id, newID)
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.EnlistReply{ID: m.ID, State: m.State, Index: idx})
	return nil
}

// checkEnlist holds an enlist to the limits of a report's same fields.
func checkEnlist(req wire.EnlistRequest) error {
	for _, f := range [][2]string{{"system_uuid", req.SystemUUID}, {"serial", req.Serial}, {"boot_mac", req.BootMAC}} {
		if err := inventory.CheckText(f[0], f[1], false); err != nil {
			return inventoryRefusal(err)
		}
	}
	if len(req.MACs) > maxEnlistMACs {
		return BadRequest("macs: %d entries is more than the %d allowed", len(req.MACs), maxEnlistMACs)
	}
	return nil
}

// machineByIdentity reads back the machine an applied enlist or commission
// resolved to.
func (s *Server) machineByIdentity(id raftfsm.Identity, newID string) (store.Machine, error) {
	var m store.Machine
	err := s.cfg.DB.View(func(tx *store.Tx) error {
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

func (s *Server) postCommission(c *gin.Context) error {
	var rep inventory.Report
	if err := decodeBody(c, maxInventoryBytes, &rep); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusRequestEntityTooLarge {
			return Errorf(http.StatusRequestEntityTooLarge, "too_large", "inventory is larger than the %d MiB allowed", maxInventoryBytes>>20)
		}
		return err
	}
	if am := agentMAC(c); rep.BootMAC == "" {
		rep.BootMAC = am
	}
	cmd, err := s.commissionCommand(&rep, agentMAC(c))
	if err != nil {
		return err
	}
	idx, err := s.applyCommission(c.Request.Context(), cmd, &rep)
	if err != nil {
		return err
	}
	m, err := s.machineByIdentity(cmd.Identity, cmd.NewID)
	if err != nil {
		return err
	}
	s.log.Info("machine commissioned", "machine", m.ID, "key", cmd.Identity.Key, "index", idx)
	go s.queueDetect(s.cfg.Background, m.ID)
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.CommissionReply{ID: m.ID, State: m.State, Index: idx})
	return nil
}

// applyCommission proposes a commission and, when tags have rules, the
// machine's auto tags as the rules find it, in the same log entry (a
// machine leaves commissioning with its auto tags: raftfsm's
// CommissionAutoTags). The leader does not precheck a batch, so the
// commission is checked here first: a refusal takes no entry. A rule that
// fails on the machine leaves its tags as they were (logged).
func (s *Server) applyCommission(ctx context.Context, cmd *raftfsm.Commission, rep *inventory.Report) (uint64, error) {
	var set *raftfsm.AutoTagsSet
	var failed []error
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		set, failed, err = raftfsm.CommissionAutoTags(tx, cmd, rep)
		return err
	}); err != nil {
		return 0, err
	}
	for _, f := range failed {
		s.log.Warn("tag rule failed at commissioning: the machine keeps its tags", "err", f)
	}
	if set == nil {
		return s.cfg.Cluster.Apply(ctx, cmd)
	}
	if err := s.cfg.Cluster.FSM().Precheck(cmd); err != nil {
		return 0, err
	}
	b, err := raftfsm.NewBatch(cmd, set)
	if err != nil {
		return 0, err
	}
	idx, err := s.cfg.Cluster.Apply(ctx, b)
	var be *cluster.BatchError
	if errors.As(err, &be) && len(be.Errs) == 2 {
		if be.Errs[0] != nil {
			return idx, be.Errs[0]
		}
		s.log.Warn("auto tags at commissioning were refused: the machine keeps its tags", "index", idx, "err", be.Errs[1])
		return idx, nil
	}
	return idx, err
}

// commissionCommand validates a report and turns it into a command: the BMC
// password is sealed and removed from the stored document before anything
// leaves this function.
//
// agentMAC is the MAC of the boot token the upload came with ("" for
// an operator's shared agent token): the report's boot MAC must be it.
func (s *Server) commissionCommand(rep *inventory.Report, agentMAC string) (*raftfsm.Commission, error) {
	if err := inventory.Validate(rep); err != nil {
		// inventory.Validate writes its findings for the operator (the
		// agent prints the same), one a line, naming the field.
		return nil, Wrap(http.StatusBadRequest, "invalid_inventory", "inventory rejected: "+strings.ReplaceAll(err.Error(), "\n", "; "), err)
	}
	if agentMAC != "" && rep.BootMAC != agentMAC {
		return nil, Errorf(http.StatusForbidden, "forbidden", "boot_mac %s is not the MAC this boot token was handed to (%s)", rep.BootMAC, agentMAC)
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
			sealed, err := s.cfg.Key.Seal([]byte(rep.BMC.Password), []byte(aad))
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
		Node:      s.cfg.Name,
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

// BMC hints carry passwords, so only the booted machine may ask, only for
// its own MACs, a few at a time and a few times a minute.
const (
	maxHintMACs     = 8
	hintsPerMinute  = 10
	hintLimiterKeys = 65536
)

// getBMCHint is GET /api/v1/bmc-hint?macs=a,b, with a boot token: the MACs
// must be the token's own MAC or MACs of the machine that owns it.
func (s *Server) getBMCHint(c *gin.Context) error {
	am := agentMAC(c)
	raw := c.Query("macs")
	if raw == "" {
		return BadRequest("macs is required: a comma-separated list of the machine's MACs")
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxHintMACs {
		return BadRequest("macs: %d MACs is more than the %d a hint may ask for", len(parts), maxHintMACs)
	}
	if !s.hintLimiter.allow(am, time.Now()) {
		return Errorf(http.StatusTooManyRequests, "rate_limited", "at most %d BMC hints a minute for one machine; retry later", hintsPerMinute)
	}
	own := map[string]bool{am: true}
	s.cfg.DB.View(func(tx *store.Tx) error {
		for _, id := range tx.MachineIDsByMAC(am) {
			if m, err := tx.Machine(id); err == nil {
				for _, mac := range m.MACs {
					own[mac] = true
				}
			}
		}
		return nil
	})
	for _, p := range parts {
		mac, err := store.NormalizeMAC(p)
		if err != nil {
			return err
		}
		if !own[mac] {
			return Errorf(http.StatusForbidden, "forbidden", "%s is not a MAC of the machine this boot token was handed to", mac)
		}
		if h, ok := s.cfg.BMCHints[mac]; ok {
			c.JSON(http.StatusOK, wire.BMCHintReply{MAC: mac, Driver: h.Driver, Address: h.Address, User: h.User, Password: h.Password})
			return nil
		}
	}
	return Errorf(http.StatusNotFound, "not_found", "no bmc_hints entry for these MACs")
}

// inventoryRefusal is a field the agent's report rules refuse. Their
// messages are written for the operator by store/inventory, which the agent
// shares and which cannot speak the API's error types: the field, the
// limit, what was sent.
func inventoryRefusal(err error) error {
	return Wrap(http.StatusBadRequest, "bad_request", err.Error(), err)
}

// dedupe drops repeats, keeping the first of each in place (a report may
// hold 32,768 addresses: a set, not a scan).
func dedupe(in []string) []string {
	var out []string
	seen := make(map[string]struct{}, len(in))
	for _, v := range in {
		if _, dup := seen[v]; !dup {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}
