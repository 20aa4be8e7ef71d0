package httpapi

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/ssh"

	"github.com/rollcall/rollcall/appliance/boottoken"
	"github.com/rollcall/rollcall/appliance/overlay"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Stateless nodes (the reference's "Stateless nodes (Warewulf-style)"):
// profiles, overlays, assignments, and what a node fetches with its token.
// Every write is checked on the local copy first (the cluster's
// precheck), and an overlay's templates are parsed, and rendered for every
// node that would get them, before it is proposed: a template that does
// not parse or render is refused with its file and line and takes no Raft
// entry. A node's fetch renders on whichever node it asks (the overlays
// are in the store) and is its heartbeat, written through Raft at most
// once a seen interval per node (seenWriter).

// ctxNode holds the machine a node token was for, ctxNodeRecord its
// stateless node record as requireNode read it.
const (
	ctxNode       = "rollcall.node_machine"
	ctxNodeRecord = "rollcall.node_record"
)

// nodeCallsPerMinute bounds one node's calls (its refresh is every five
// minutes; a boot makes two or three).
const nodeCallsPerMinute = 30

// maxOverlayBody bounds PUT /overlays: the content in base64 and each
// file's JSON around it.
const maxOverlayBody = store.MaxOverlayBytes*4/3 + store.MaxOverlayFiles*512 + 64<<10

func (s *Server) statelessRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/profiles", AuthAdmin, "stateless profiles by name (?index=&wait=)", nil, s.listProfiles},
		{"GET", "/api/v1/profiles/:name", AuthAdmin, "one profile", nil, s.getProfile},
		{"POST", "/api/v1/profiles/:name", AuthAdmin, "add a profile: its image, overlays, kernel arguments, node name pool, subnets and variables", wire.ProfileRequest{}, s.postProfile},
		{"PUT", "/api/v1/profiles/:name", AuthAdmin, "replace a profile (the whole; rollcall profile set reads it first)", wire.ProfileRequest{}, s.putProfile},
		{"DELETE", "/api/v1/profiles/:name", AuthAdmin, "remove a profile no machine is assigned to", nil, s.deleteProfile},
		{"GET", "/api/v1/profiles/:name/render", AuthAdmin, "what a node of the profile (?node=NAME), or the controller, gets at ?path= (system/etc/hosts, or /etc/hosts: the system tree, then the runtime one); secrets as placeholders", nil, s.getRender},
		{"GET", "/api/v1/overlays", AuthAdmin, "overlays by name (?index=&wait=)", nil, s.listOverlays},
		{"GET", "/api/v1/overlays/:name", AuthAdmin, "one overlay and its files (?content=1: with their content)", nil, s.getOverlay},
		{"PUT", "/api/v1/overlays/:name", AuthAdmin, "create or replace an overlay: its whole tree (system/… and runtime/…); templates (.tmpl) are parsed and rendered for every node that gets them first", wire.OverlayRequest{}, s.putOverlay},
		{"DELETE", "/api/v1/overlays/:name", AuthAdmin, "remove an overlay no profile names", nil, s.deleteOverlay},
		{"POST", "/api/v1/machines/:id/assign", AuthAdmin, "assign a ready machine to a profile: a node name, addresses, a host key and a token; boot: power-cycle it", wire.AssignRequest{}, s.postAssign},
		{"POST", "/api/v1/machines/:id/unassign", AuthAdmin, "take a stateless node back to ready: its name and addresses freed", nil, s.postUnassign},
		{"GET", "/api/v1/stateless/nodes", AuthAdmin, "stateless nodes by machine: name, profile, addresses, booted, last seen, stale (?index=&wait=)", nil, s.listStatelessNodes},
		{"GET", "/api/v1/stateless/nodes/:id", AuthAdmin, "one stateless node (a machine ID or name)", nil, s.getStatelessNode},
		{"GET", "/api/v1/cluster/vars", AuthAdmin, "the cluster's variables (templates' .ClusterVars) (?index=&wait=)", nil, s.getClusterVars},
		{"PUT", "/api/v1/cluster/vars", AuthAdmin, "replace the cluster's variables", wire.ClusterVars{}, s.putClusterVars},
		{"GET", "/api/v1/stateless/self", AuthNode, "the node's own record: machine, name, profile, addresses, refresh interval", nil, s.getStatelessSelf},
		{"GET", "/api/v1/stateless/self/overlay/:tree", AuthNode, "the node's rendered system or runtime tree, as a tar; a fetch is its heartbeat", nil, s.getSelfOverlay},
	}
}

// ---- views

func (s *Server) refresh() time.Duration {
	if s.cfg.StatelessRefresh > 0 {
		return s.cfg.StatelessRefresh
	}
	return store.RefreshInterval
}

func (s *Server) statelessNode(n store.StatelessNode, now time.Time) wire.StatelessNode {
	return wireStatelessNode(n, n.StaleAfter(now, store.StaleAfterFor(s.refresh())))
}

func wireStatelessNode(n store.StatelessNode, stale bool) wire.StatelessNode {
	return wire.StatelessNode{
		Machine: n.Machine, Profile: n.Profile, Name: n.Name, Number: n.Number, Addresses: n.Addresses,
		Generation: n.Generation, Assigned: n.Assigned, Booted: n.Booted, LastSeen: n.LastSeen,
		Stale: stale, SSHHostKeyPub: n.SSHHostKeyPub,
	}
}

func wireProfile(p store.Profile, nodes int) wire.Profile {
	return wire.Profile{
		Name: p.Name, Image: p.Image, Overlays: p.Overlays, Args: p.Args, NameFormat: p.NameFormat,
		NameFirst: p.NameFirst, NameLast: p.NameLast, Subnets: p.Subnets, Vars: p.Vars, Created: p.Created, Index: p.Index, Nodes: nodes,
	}
}

func wireOverlay(o store.Overlay, profiles []string, files, content bool) wire.Overlay {
	v := wire.Overlay{Name: o.Name, SHA256: o.SHA256, Size: o.Size, FileCount: len(o.Files), Updated: o.Updated, Index: o.Index, Profiles: profiles}
	for _, f := range o.Files {
		if strings.HasSuffix(f.Path, overlay.TemplateSuffix) {
			v.Templates++
		}
		if files {
			wf := wire.OverlayFile{Path: f.Path, Mode: f.Mode, Size: int64(len(f.Content)), SHA256: hexSum(f.Content)}
			if content {
				wf.Content = f.Content
			}
			v.Files = append(v.Files, wf)
		}
	}
	return v
}

func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// profileUsers lists the profiles naming each overlay.
func profileUsers(ps []store.Profile) map[string][]string {
	out := map[string][]string{}
	for _, p := range ps {
		for _, o := range p.Overlays {
			out[o] = append(out[o], p.Name)
		}
	}
	return out
}

// ---- profiles

func (s *Server) listProfiles(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableProfiles); err != nil {
		return err
	}
	var out wire.ProfileList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableProfiles)
		ps, err := tx.Profiles()
		for _, p := range ps {
			out.Profiles = append(out.Profiles, wireProfile(p, len(tx.StatelessMachinesByProfile(p.Name))))
		}
		return err
	}); err != nil {
		return err
	}
	out.Profiles = nonNil(out.Profiles)
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getProfile(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	return s.respondProfile(c, http.StatusOK, c.Param("name"), 0)
}

func (s *Server) respondProfile(c *gin.Context, status int, name string, idx uint64) error {
	var v wire.Profile
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		p, err := tx.Profile(name)
		v = wireProfile(p, len(tx.StatelessMachinesByProfile(name)))
		return err
	}); err != nil {
		return err
	}
	setIndex(c, max(idx, v.Index))
	c.JSON(status, v)
	return nil
}

func (s *Server) postProfile(c *gin.Context) error { return s.saveProfile(c, false) }
func (s *Server) putProfile(c *gin.Context) error  { return s.saveProfile(c, true) }

func (s *Server) saveProfile(c *gin.Context, replace bool) error {
	var req wire.ProfileRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	p := store.Profile{Name: c.Param("name"), Image: req.Image, Overlays: req.Overlays, Args: req.Args, NameFormat: req.NameFormat,
		NameFirst: req.NameFirst, NameLast: req.NameLast, Subnets: req.Subnets, Vars: req.Vars}.WithDefaults()
	if err := store.CheckProfile(p); err != nil {
		return err
	}
	if err := s.ensureMungeKey(c); err != nil {
		return err
	}
	cmd := &raftfsm.ProfilePut{Profile: raftfsm.ProfileBody(p), Replace: replace, Now: time.Now().UTC()}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if replace {
		status = http.StatusOK
	}
	return s.respondProfile(c, status, p.Name, idx)
}

// ensureMungeKey makes the cluster's munge key with its first profile:
// 1024 random bytes, sealed before they enter a command.
func (s *Server) ensureMungeKey(c *gin.Context) error {
	var ok bool
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { _, ok, err = tx.MungeKey(); return err }); err != nil || ok {
		return err
	}
	key := make([]byte, store.MungeKeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	sealed, err := s.cfg.Key.Seal(key, []byte(store.MungeKeyAAD))
	clear(key)
	if err != nil {
		return err
	}
	_, err = s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.MungeKeySet{Sealed: sealed, Now: time.Now().UTC()})
	return err
}

func (s *Server) deleteProfile(c *gin.Context) error {
	return s.deleteNamed(c, "profile", func(name string) raftfsm.Command { return &raftfsm.ProfileDelete{Name: name} })
}

// deleteNamed proposes the delete of a profile or an overlay by :name.
func (s *Server) deleteNamed(c *gin.Context, what string, cmd func(string) raftfsm.Command) error {
	name := c.Param("name")
	if err := store.ValidImageName(name); err != nil {
		return BadRequest("%s name %q is not a %s name", what, store.Clip(name), what)
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd(name))
	if err != nil {
		return err
	}
	return deleted(c, idx, name)
}

// getRender answers what a node (or the controller) gets at a path.
func (s *Server) getRender(c *gin.Context) error {
	p := c.Query("path")
	if p == "" || len(p) > store.MaxOverlayPath+len(overlay.TemplateSuffix) || !utf8.ValidString(p) {
		return BadRequest("give ?path= (system/etc/hosts, or /etc/hosts), at most %d bytes", store.MaxOverlayPath)
	}
	if err := s.minIndex(c); err != nil {
		return err
	}
	profile, nodeName := c.Param("name"), c.Query("node")
	var out wire.Render
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		if _, err := tx.Profile(profile); err != nil {
			return err
		}
		t := overlay.Target{Profile: profile}
		if nodeName != "" {
			id, ok := tx.StatelessNodeByName(nodeName)
			if !ok {
				if n, err := tx.StatelessNode(nodeName); err == nil {
					id, ok = n.Machine, true
				}
			}
			if !ok {
				return store.Errorf(store.ErrNotFound, "no stateless node %q", store.Clip(nodeName))
			}
			t.Machine = id
		}
		f, tree, err := s.overlays.Lookup(tx, t, p)
		if err != nil {
			return err
		}
		out = wire.Render{Profile: profile, Node: nodeName, Overlay: f.Overlay, Path: tree + "/" + f.Path, Mode: f.Mode}
		if utf8.Valid(f.Data) {
			out.Content = string(f.Data)
		} else {
			out.ContentBase64 = f.Data
		}
		return nil
	}); err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// statelessErrors answers a template's failure as 422 with its file and
// line.
func statelessErrors(err error) *Error {
	if errors.Is(err, overlay.ErrTemplate) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "invalid_template",
			Message: strings.Replace(err.Error(), overlay.ErrTemplate.Error()+": ", "", 1), cause: err}
	}
	return nil
}

// ---- overlays

func (s *Server) listOverlays(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableOverlays); err != nil {
		return err
	}
	var out wire.OverlayList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableOverlays)
		ps, err := tx.Profiles()
		if err != nil {
			return err
		}
		users := profileUsers(ps)
		os, err := tx.Overlays()
		for _, o := range os {
			out.Overlays = append(out.Overlays, wireOverlay(o, users[o.Name], false, false))
		}
		return err
	}); err != nil {
		return err
	}
	out.Overlays = nonNil(out.Overlays)
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getOverlay(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	return s.respondOverlay(c, http.StatusOK, c.Param("name"), c.Query("content") == "1", 0)
}

func (s *Server) respondOverlay(c *gin.Context, status int, name string, content bool, idx uint64) error {
	var v wire.Overlay
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		o, err := tx.Overlay(name)
		if err != nil {
			return err
		}
		ps, err := tx.Profiles()
		v = wireOverlay(o, profileUsers(ps)[name], true, content)
		return err
	}); err != nil {
		return err
	}
	setIndex(c, max(idx, v.Index))
	c.JSON(status, v)
	return nil
}

func (s *Server) putOverlay(c *gin.Context) error {
	name := c.Param("name")
	if err := store.ValidImageName(name); err != nil {
		return BadRequest("overlay name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63, not starting with a dot)", store.Clip(name))
	}
	var req wire.OverlayRequest
	if err := decodeBody(c, maxOverlayBody, &req); err != nil {
		return err
	}
	files := make([]store.OverlayFile, len(req.Files))
	for i, f := range req.Files {
		files[i] = store.OverlayFile{Path: f.Path, Mode: f.Mode, Content: f.Content}
		if files[i].Mode == 0 {
			files[i].Mode = 0o644
		}
	}
	if err := store.CheckOverlayFiles(files); err != nil {
		return err
	}
	store.SortOverlayFiles(files)
	if err := overlay.Check(files); err != nil {
		return err
	}
	if err := s.trialRender(name, files); err != nil {
		return err
	}
	existed := false
	s.cfg.DB.View(func(tx *store.Tx) error { _, err := tx.Overlay(name); existed = err == nil; return nil })
	cmd := &raftfsm.OverlayPut{Name: name, Now: time.Now().UTC()}
	for _, f := range files {
		cmd.Files = append(cmd.Files, raftfsm.OverlayFileBody(f))
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), cmd)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	return s.respondOverlay(c, status, name, false, idx)
}

// trialRender renders the overlay as it would be stored for every node
// that would get it, and for each profile naming it: a template that
// fails for one of them is refused now rather than at that node's boot.
func (s *Server) trialRender(name string, files []store.OverlayFile) error {
	return s.cfg.DB.View(func(tx *store.Tx) error { return s.overlays.Trial(tx, name, files) })
}

func (s *Server) deleteOverlay(c *gin.Context) error {
	return s.deleteNamed(c, "overlay", func(name string) raftfsm.Command { return &raftfsm.OverlayDelete{Name: name} })
}

// ---- assignments

func (s *Server) postAssign(c *gin.Context) error {
	var req wire.AssignRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	if err := store.ValidImageName(req.Profile); err != nil {
		return BadRequest("give the profile to assign to (profile: a profile's name)")
	}
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	sealed, pub, err := s.newHostKey(m.ID)
	if err != nil {
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.Assign{Machine: m.ID, Profile: req.Profile,
		SSHHostKeySealed: sealed, SSHHostKeyPub: pub, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	var res wire.AssignResult
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		n, err := tx.StatelessNode(m.ID)
		res.Node = s.statelessNode(n, time.Now())
		return err
	}); err != nil {
		return err
	}
	if req.Boot {
		id, err := s.cfg.Jobs.Enqueue(c.Request.Context(), m, store.Job{Kind: store.JobPower, Arg: "cycle", Requester: "api: assign -boot"})
		if err != nil {
			res.PowerError = store.Public(err)
		}
		res.PowerJob = id
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, res)
	return nil
}

// newHostKey makes a node's ed25519 SSH host key: the OpenSSH PEM sealed
// for the machine, and the public line.
func (s *Server) newHostKey(machine string) ([]byte, string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, "", err
	}
	pemKey := pem.EncodeToMemory(block)
	sealed, err := s.cfg.Key.Seal(pemKey, []byte(store.SSHHostKeyAAD(machine)))
	clear(pemKey)
	clear(priv)
	if err != nil {
		return nil, "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	return sealed, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))), nil
}

func (s *Server) postUnassign(c *gin.Context) error {
	m, err := s.machineRef(c)
	if err != nil {
		return err
	}
	var n store.StatelessNode
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { n, err = tx.StatelessNode(m.ID); return err }); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Errorf(http.StatusConflict, "conflict", "machine %s is %s, not assigned to a profile", m.ID, m.State)
		}
		return err
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.Unassign{Machine: m.ID, Now: time.Now().UTC()})
	if err != nil {
		return err
	}
	s.overlays.Forget(m.ID)
	setIndex(c, idx)
	c.JSON(http.StatusOK, s.statelessNode(n, time.Now()))
	return nil
}

func (s *Server) listStatelessNodes(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableStatelessNodes); err != nil {
		return err
	}
	var out wire.StatelessNodeList
	now := time.Now()
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableStatelessNodes)
		ns, err := tx.StatelessNodes()
		for _, n := range ns {
			out.Nodes = append(out.Nodes, s.statelessNode(n, now))
		}
		return err
	}); err != nil {
		return err
	}
	out.Nodes = nonNil(out.Nodes)
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getStatelessNode(c *gin.Context) error {
	if err := s.minIndex(c); err != nil {
		return err
	}
	ref := c.Param("id")
	var n store.StatelessNode
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		if id, ok := tx.StatelessNodeByName(ref); ok {
			ref = id
		} else if m, err := tx.MachineByRef(ref); err == nil {
			ref = m.ID
		}
		var err error
		if n, err = tx.StatelessNode(ref); errors.Is(err, store.ErrNotFound) {
			return store.Errorf(store.ErrNotFound, "no stateless node %q", store.Clip(c.Param("id")))
		}
		return err
	}); err != nil {
		return err
	}
	c.JSON(http.StatusOK, s.statelessNode(n, time.Now()))
	return nil
}

// ---- cluster variables

func (s *Server) getClusterVars(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableClusterVars); err != nil {
		return err
	}
	var v store.ClusterVars
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { v, err = tx.ClusterVars(); return err }); err != nil {
		return err
	}
	if v.Vars == nil {
		v.Vars = map[string]string{}
	}
	setIndex(c, v.Index)
	c.JSON(http.StatusOK, wire.ClusterVars{Vars: v.Vars, Index: v.Index, Updated: v.Updated})
	return nil
}

func (s *Server) putClusterVars(c *gin.Context) error {
	var req wire.ClusterVars
	if err := decodeBody(c, store.MaxProfileVarBytes+64<<10, &req); err != nil {
		return err
	}
	if err := store.CheckVars("cluster vars", req.Vars); err != nil {
		return err
	}
	if _, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.ClusterVarsSet{Vars: req.Vars, Now: time.Now().UTC()}); err != nil {
		return err
	}
	return s.getClusterVars(c)
}

// ---- the node's own calls

// requireNode admits a stateless node: X-Rollcall-Node is a node token of
// this cluster whose generation is still the machine's assignment. The
// machine's calls are rate limited; a token for an unassigned or
// reassigned machine is refused without a Raft entry.
func (s *Server) requireNode(c *gin.Context) error {
	tok := c.GetHeader("X-Rollcall-Node")
	if tok == "" {
		return unauthorized("node token required (X-Rollcall-Node: the rollcall.node= of the node's command line)")
	}
	machine, gen, err := boottoken.ParseNode(s.cfg.Key, tok)
	if err != nil {
		return Wrap(http.StatusUnauthorized, "unauthorized", "wrong node token", err)
	}
	if !s.nodeLimiter.allow(machine, time.Now()) {
		return Errorf(http.StatusTooManyRequests, "rate_limited", "at most %d calls a minute for one node; retry later", nodeCallsPerMinute)
	}
	// The renderer's view holds every node's record, decoded once per
	// change of the nodes table.
	var n store.StatelessNode
	var ok bool
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) { n, ok, err = s.overlays.Node(tx, machine); return err }); err != nil || !ok || n.Generation != gen {
		return unauthorized("this node token is for an assignment that ended (the machine was unassigned or assigned again): boot the machine again")
	}
	c.Set(ctxNode, machine)
	c.Set(ctxNodeRecord, n)
	c.Next()
	return nil
}

// nodeRecord is the calling node's record, as requireNode read it.
func nodeRecord(c *gin.Context) store.StatelessNode {
	n, _ := c.MustGet(ctxNodeRecord).(store.StatelessNode)
	return n
}

func (s *Server) getStatelessSelf(c *gin.Context) error {
	n := nodeRecord(c)
	c.JSON(http.StatusOK, wire.StatelessSelf{Machine: n.Machine, Name: n.Name, Profile: n.Profile, Addresses: nonNil(n.Addresses),
		RefreshSeconds: int(s.refresh() / time.Second)})
	return nil
}

func (s *Server) getSelfOverlay(c *gin.Context) error {
	machine, tree := c.GetString(ctxNode), c.Param("tree")
	if tree != store.TreeSystem && tree != store.TreeRuntime {
		return BadRequest("tree %q: system or runtime", store.Clip(tree))
	}
	var b overlay.Tar
	n := nodeRecord(c)
	if err := s.cfg.DB.View(func(tx *store.Tx) (err error) {
		b, err = s.overlays.Tar(tx, overlay.Target{Machine: machine, Secrets: true}, tree)
		return err
	}); err != nil {
		if errors.Is(err, overlay.ErrTemplate) {
			s.log.Warn("stateless node's overlay does not render", "machine", machine, "node", n.Name, "tree", tree, "err", err)
		}
		return err
	}
	s.seen.note(n, time.Now().UTC())
	c.Header("Cache-Control", "no-store")
	c.Header("Content-Type", "application/x-tar")
	c.Header("Content-Length", strconv.FormatInt(b.Size, 10))
	c.Status(http.StatusOK)
	if c.Request.Method != http.MethodHead {
		b.WriteTo(c.Writer) // a client gone away: nothing to tell it
	}
	return nil
}
