package pgexport

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
	"github.com/rollcall/rollcall/store/inventory"
)

// rowSet collects rows per table before they are copied.
type rowSet struct {
	s    *Schema
	rows map[string][][]any
	n    int
}

func newRowSet(s *Schema) *rowSet { return &rowSet{s: s, rows: map[string][][]any{}} }

func (r *rowSet) add(table string, row []any) {
	r.rows[table] = append(r.rows[table], row)
	r.n++
}

// addMachine adds a machine and everything derived from it and from its
// inventory document (nil when it has none). Events are separate.
func (r *rowSet) addMachine(m store.Machine, doc []byte, dep *store.DeployJob) error {
	var inv any
	var rep *inventory.Report
	if doc != nil {
		clean, parsed, err := cleanInventory(doc)
		if err != nil {
			return fmt.Errorf("machine %s: %w", m.ID, err)
		}
		inv, rep = clean, parsed
	}
	r.add("machines", r.s.Table("machines").row(nil, m, append([]any{inv}, deploymentRow(dep)...)...))
	for i, mac := range m.MACs {
		r.add("machine_macs", r.s.Table("machine_macs").row([]any{m.ID, int32(i), mac}, nil))
	}
	if m.BMC != nil {
		r.add("bmcs", r.s.Table("bmcs").row([]any{m.ID}, m.BMC))
	}
	if rep == nil {
		return nil
	}
	r.add("inventories", r.s.Table("inventories").row([]any{m.ID}, rep))
	addList(r, "dimms", m.ID, rep.DIMMs)
	addList(r, "cpus", m.ID, rep.CPUs)
	addList(r, "disks", m.ID, rep.Disks)
	addList(r, "nvme", m.ID, rep.NVMe)
	for c, ctrl := range rep.NVMe {
		for i, ns := range ctrl.Namespaces {
			r.add("nvme_namespaces", r.s.Table("nvme_namespaces").row([]any{m.ID, int32(c), int32(i)}, ns))
		}
	}
	addList(r, "nics", m.ID, rep.NICs)
	addList(r, "ib_hcas", m.ID, rep.IB)
	for h, hca := range rep.IB {
		for i, p := range hca.Ports {
			r.add("ib_ports", r.s.Table("ib_ports").row([]any{m.ID, int32(h), int32(i)}, p))
		}
	}
	addList(r, "gpus", m.ID, rep.GPUs)
	addList(r, "pci_devices", m.ID, rep.PCI)
	addList(r, "lldp_neighbors", m.ID, rep.LLDP)
	addList(r, "inventory_errors", m.ID, rep.Errors)
	return nil
}

// deploymentRow is the values of deploymentColumns for a machine's latest
// deploy job, NULLs for none.
func deploymentRow(j *store.DeployJob) []any {
	if j == nil {
		return make([]any, len(deploymentColumns))
	}
	disk := j.Disk.Serial
	if disk == "" {
		disk = j.Disk.WWN
	}
	if disk == "" {
		disk = j.Disk.Name
	}
	var phoned any
	if !j.PhonedHome.IsZero() {
		phoned = j.PhonedHome
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return noNUL(s)
	}
	return []any{j.ID, nullable(j.OS), nullable(j.OSVersion), j.State, nullable(disk), phoned}
}

// machineDeployment is a machine's latest deploy job, nil for none.
func machineDeployment(tx *store.Tx, id string) (*store.DeployJob, error) {
	j, ok, err := tx.CurrentDeployment(id)
	if err != nil || !ok {
		return nil, err
	}
	return &j, nil
}

// addOSImage adds an OS image and its versions.
func (r *rowSet) addOSImage(o store.OSImage) {
	r.add("os_images", r.s.Table("os_images").row(nil, o))
	t := r.s.Table("os_versions")
	for i := range o.Versions {
		r.add("os_versions", t.row([]any{o.Name}, &o.Versions[i]))
	}
}

// addOSDeploy adds every OS image and deploy job.
func (r *rowSet) addOSDeploy(tx *store.Tx) error {
	images, err := tx.OSImages()
	if err != nil {
		return err
	}
	for _, o := range images {
		r.addOSImage(o)
	}
	return tx.ForEachDeployJob(func(j store.DeployJob) error {
		r.add("deploy_jobs", r.s.Table("deploy_jobs").row(nil, j))
		return nil
	})
}

func addList[T any](r *rowSet, table, id string, items []T) {
	t := r.s.Table(table)
	for i := range items {
		r.add(table, t.row([]any{id, int32(i)}, &items[i]))
	}
}

func (r *rowSet) addEvent(e store.Event, seq uint32) {
	r.add("events", r.s.Table("events").row(nil, e, int32(seq)))
}

func (r *rowSet) addNetwork(tx *store.Tx) error {
	fabrics, err := tx.Fabrics()
	if err != nil {
		return err
	}
	for _, f := range fabrics {
		r.add("fabrics", r.s.Table("fabrics").row(nil, f))
	}
	vlans, err := tx.VLANs()
	if err != nil {
		return err
	}
	for _, v := range vlans {
		r.add("vlans", r.s.Table("vlans").row(nil, v))
	}
	subnets, err := tx.Subnets()
	if err != nil {
		return err
	}
	for _, s := range subnets {
		r.add("subnets", r.s.Table("subnets").row(nil, s))
	}
	ranges, err := tx.Ranges(netip.Prefix{}) // the zero prefix lists every range
	if err != nil {
		return err
	}
	for _, rg := range ranges {
		r.add("ranges", r.s.Table("ranges").row(nil, rg))
	}
	return nil
}

// addImage adds an image and its files.
func (r *rowSet) addImage(im store.Image) {
	r.add("images", r.s.Table("images").row(nil, im))
	t := r.s.Table("image_files")
	for i := range im.Files {
		r.add("image_files", t.row([]any{im.Name, int32(i)}, &im.Files[i]))
	}
}

// addDHCPImagesJobs adds every lease block, lease, image and BMC job.
func (r *rowSet) addDHCPImagesJobs(tx *store.Tx) error {
	blocks, err := tx.LeaseBlocks(netip.Prefix{}) // the zero prefix lists every block
	if err != nil {
		return err
	}
	for _, b := range blocks {
		r.add("lease_blocks", r.s.Table("lease_blocks").row(nil, b))
	}
	err = tx.ForEachLease(func(l store.Lease) error {
		r.add("leases", r.s.Table("leases").row(nil, l))
		return nil
	})
	if err != nil {
		return err
	}
	images, err := tx.Images()
	if err != nil {
		return err
	}
	for _, im := range images {
		r.addImage(im)
	}
	return tx.ForEachJob(func(j store.Job) error {
		r.add("bmc_jobs", r.s.Table("bmc_jobs").row(nil, j))
		return nil
	})
}

// addCertsAudit adds every certificate record and audit event.
func (r *rowSet) addCertsAudit(tx *store.Tx) error {
	certs, err := tx.Certs("")
	if err != nil {
		return err
	}
	for _, c := range certs {
		r.add("certificates", r.s.Table("certificates").row(nil, c))
	}
	for before := uint64(0); ; {
		evs, err := tx.Audit(before, 1000)
		if err != nil {
			return err
		}
		for _, e := range evs {
			r.add("audit", r.s.Table("audit").row(nil, e))
		}
		if len(evs) < 1000 {
			return nil
		}
		before = evs[len(evs)-1].Seq
	}
}

// clusterCA is one of the cluster's CA roots, a row of cluster_cas.
type clusterCA struct {
	Fingerprint  string    `json:"fingerprint"`
	Role         string    `json:"role"`
	Subject      string    `json:"subject"`
	Serial       string    `json:"serial"`
	NotBefore    time.Time `json:"not_before"`
	NotAfter     time.Time `json:"not_after"`
	TrustedUntil time.Time `json:"trusted_until,omitzero"`
	Rotated      time.Time `json:"rotated,omitzero"`
	RotatedBy    string    `json:"rotated_by,omitempty"`
}

// addClusterCAs adds the current root and the previous ones still in their
// transition at the proposer's last rotation (all that were kept).
func (r *rowSet) addClusterCAs(tx *store.Tx) error {
	id, err := tx.Identity()
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	row := func(certPEM, role string) (clusterCA, error) {
		b, _ := pem.Decode([]byte(certPEM))
		if b == nil {
			return clusterCA{}, fmt.Errorf("cluster ca (%s): no PEM block", role)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return clusterCA{}, fmt.Errorf("cluster ca (%s): %w", role, err)
		}
		sum := sha256.Sum256(c.Raw)
		return clusterCA{Fingerprint: hex.EncodeToString(sum[:]), Role: role, Subject: c.Subject.String(), Serial: c.SerialNumber.Text(16),
			NotBefore: c.NotBefore.UTC(), NotAfter: c.NotAfter.UTC()}, nil
	}
	cur, err := row(id.CACertPEM, "current")
	if err != nil {
		return err
	}
	cur.Rotated, cur.RotatedBy = id.Rotated, id.RotatedBy
	r.add("cluster_cas", r.s.Table("cluster_cas").row(nil, cur))
	for _, p := range id.PreviousCAs {
		prev, err := row(p.CertPEM, "previous")
		if err != nil {
			return err
		}
		prev.TrustedUntil = p.Until
		r.add("cluster_cas", r.s.Table("cluster_cas").row(nil, prev))
	}
	return nil
}

// addTagsRacks adds every tag definition, rack and interface layout.
func (r *rowSet) addTagsRacks(tx *store.Tx) error {
	tags, err := tx.Tags()
	if err != nil {
		return err
	}
	for _, tg := range tags {
		r.add("tags", r.s.Table("tags").row(nil, tg))
	}
	racks, err := tx.Racks()
	if err != nil {
		return err
	}
	for _, rk := range racks {
		r.add("racks", r.s.Table("racks").row(nil, rk))
	}
	layouts, err := tx.Layouts()
	if err != nil {
		return err
	}
	for _, l := range layouts {
		r.add("layouts", r.s.Table("layouts").row(nil, l))
	}
	return nil
}

// addOverlay adds an overlay and its files, without their content.
func (r *rowSet) addOverlay(o store.Overlay) {
	r.add("overlays", r.s.Table("overlays").row(nil, o, int32(len(o.Files))))
	t := r.s.Table("overlay_files")
	for i := range o.Files {
		f := &o.Files[i]
		sum := sha256.Sum256(f.Content)
		r.add("overlay_files", t.row([]any{o.Name}, f, int64(len(f.Content)), hex.EncodeToString(sum[:])))
	}
}

// addStateless adds every profile, overlay and stateless node.
func (r *rowSet) addStateless(tx *store.Tx) error {
	profiles, err := tx.Profiles()
	if err != nil {
		return err
	}
	for _, p := range profiles {
		r.add("profiles", r.s.Table("profiles").row(nil, p))
	}
	overlays, err := tx.Overlays()
	if err != nil {
		return err
	}
	for _, o := range overlays {
		r.addOverlay(o)
	}
	nodes, err := tx.StatelessNodes()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		r.add("stateless_nodes", r.s.Table("stateless_nodes").row(nil, n))
	}
	return r.addClusterVars(tx)
}

// clusterVar is one of the cluster's variables, a row of cluster_vars.
type clusterVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// addClusterVars adds the cluster's variables, by name.
func (r *rowSet) addClusterVars(tx *store.Tx) error {
	v, err := tx.ClusterVars()
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(v.Vars)) {
		r.add("cluster_vars", r.s.Table("cluster_vars").row(nil, clusterVar{Name: k, Value: v.Vars[k]}))
	}
	return nil
}

// cleanInventory parses a stored report and returns it as jsonb without
// the BMC password (the server strips it before storing; this makes sure an
// older record cannot leak one) and without NUL characters, which
// PostgreSQL refuses in text and jsonb (firmware pads SMBIOS strings with
// them).
func cleanInventory(doc []byte) (json.RawMessage, *inventory.Report, error) {
	var rep inventory.Report
	if err := json.Unmarshal(doc, &rep); err != nil {
		return nil, nil, fmt.Errorf("decode inventory: %w", err)
	}
	if (rep.BMC == nil || rep.BMC.Password == "") && !bytes.Contains(doc, []byte(`\u0000`)) {
		return json.RawMessage(doc), &rep, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, fmt.Errorf("decode inventory: %w", err)
	}
	if m, ok := v.(map[string]any); ok {
		if bmc, ok := m["bmc"].(map[string]any); ok {
			delete(bmc, "password")
		}
	}
	b, err := json.Marshal(dropNUL(v))
	if err != nil {
		return nil, nil, fmt.Errorf("encode inventory: %w", err)
	}
	if rep.BMC != nil {
		rep.BMC.Password = ""
	}
	return b, &rep, nil
}

func dropNUL(v any) any {
	switch x := v.(type) {
	case string:
		return noNUL(x)
	case []any:
		for i := range x {
			x[i] = dropNUL(x[i])
		}
	case map[string]any:
		for k, e := range x {
			delete(x, k)
			x[noNUL(k)] = dropNUL(e)
		}
	}
	return v
}

func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
}
