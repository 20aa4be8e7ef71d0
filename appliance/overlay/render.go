package overlay

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/store"
)

// Bounds of a rendering: a template's output and a whole tree, so that a
// template looping over every node of a large cluster cannot fill the
// node's memory (the node's client refuses more than 16 MiB of tar).
const (
	MaxFileOutput = 8 << 20
	MaxTreeOutput = 15 << 20
)

// TemplateSuffix marks a file that is rendered.
const TemplateSuffix = ".tmpl"

// File is one rendered file of a tree: Path relative to the tree's root
// ("etc/hosts"), permission bits, content.
type File struct {
	Path    string
	Mode    uint32
	Data    []byte
	Overlay string // the overlay it came from
	Source  string // its path in the overlay ("system/etc/hosts.tmpl")
}

// ErrTemplate is a template that does not parse or does not render; its
// message names the file and the line.
var ErrTemplate = errors.New("overlay template")

func templateErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrTemplate, fmt.Sprintf(format, a...))
}

// parsedFile is one overlay file, its template parsed.
type parsedFile struct {
	tree   string // system or runtime
	path   string // within the tree, without .tmpl
	source string
	mode   uint32
	data   []byte             // a plain file
	tmpl   *template.Template // a template
	// shared: the template renders the same for every node of a profile
	// (nodeIndependent).
	shared bool
}

// Parse parses an overlay's templates; the first that does not parse is
// an ErrTemplate naming the file and the line. {{define}} and {{block}} are
// refused: without them a template cannot recurse, so its run time is
// bounded by its size and the data.
func Parse(files []store.OverlayFile) ([]parsedFile, error) {
	out := make([]parsedFile, 0, len(files))
	for _, f := range files {
		tree, rel, _ := strings.Cut(f.Path, "/")
		p := parsedFile{tree: tree, path: rel, source: f.Path, mode: f.Mode & 0o7777}
		if p.mode == 0 {
			p.mode = 0o644
		}
		if !strings.HasSuffix(rel, TemplateSuffix) || rel == TemplateSuffix {
			p.data = f.Content
			out = append(out, p)
			continue
		}
		p.path = strings.TrimSuffix(rel, TemplateSuffix)
		t, err := template.New(f.Path).Option("missingkey=zero").Funcs(funcs).Parse(string(f.Content))
		if err != nil {
			return nil, templateErr("%s", strings.TrimPrefix(err.Error(), "template: "))
		}
		if len(t.Templates()) > 1 || hasTemplateCall(t.Tree.Root) {
			return nil, templateErr("%s: {{define}}, {{block}} and {{template}} are not supported in overlays", f.Path)
		}
		p.shared = nodeIndependent(t.Tree.Root)
		instrument(t.Tree, t.Tree.Root)
		p.tmpl = t
		out = append(out, p)
	}
	return out, nil
}

func hasTemplateCall(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.TemplateNode:
		return true
	case *parse.ListNode:
		if n == nil {
			return false
		}
		return slices.ContainsFunc(n.Nodes, hasTemplateCall)
	case *parse.IfNode:
		return hasTemplateCall(n.List) || hasTemplateCall(n.ElseList)
	case *parse.RangeNode:
		return hasTemplateCall(n.List) || hasTemplateCall(n.ElseList)
	case *parse.WithNode:
		return hasTemplateCall(n.List) || hasTemplateCall(n.ElseList)
	}
	return false
}

// Check parses an overlay's templates (the API runs it before proposing).
func Check(files []store.OverlayFile) error {
	_, err := Parse(files)
	return err
}

// limitWriter fails once more than n bytes are written.
type limitWriter struct {
	buf bytes.Buffer
	n   int
}

var errTooMuch = errors.New("output too large")

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.n {
		return 0, errTooMuch
	}
	return w.buf.Write(p)
}

// MaxSteps bounds one template's run: every turn of a range costs the
// number of parse nodes in its body (instrument puts {{_step $ N}} at the
// start of each), so that a range over a large integer, or ranges nested
// over every node, stop with an error instead of running for hours.
// Without template calls (refused) nothing else loops, so a run is
// bounded by the template's size plus MaxSteps node executions.
const MaxSteps = 2_000_000

// stepFunc is the instrumenting action's function.
const stepFunc = "_step"

// step charges a range turn to the run's budget, which lives in the Data
// the run was given ($); a template that rebinds $ fails closed.
func step(d *Data, cost int) (string, error) {
	d.steps += cost
	if d.steps > MaxSteps {
		return "", errSteps
	}
	return "", nil
}

var errSteps = fmt.Errorf("takes more than %d steps (each turn of a range costs the size of its body)", MaxSteps)

// instrument puts {{_step $ N}} first in the body of every range under n.
func instrument(t *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			instrument(t, c)
		}
	case *parse.IfNode:
		instrument(t, n.List)
		instrument(t, n.ElseList)
	case *parse.WithNode:
		instrument(t, n.List)
		instrument(t, n.ElseList)
	case *parse.RangeNode:
		instrument(t, n.List)
		instrument(t, n.ElseList)
		if n.List == nil {
			n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
		}
		cost := 1 + countNodes(n.List)
		id := parse.NewIdentifier(stepFunc).SetTree(t).SetPos(n.Pos)
		dollar := &parse.VariableNode{NodeType: parse.NodeVariable, Pos: n.Pos, Ident: []string{"$"}}
		num := &parse.NumberNode{NodeType: parse.NodeNumber, Pos: n.Pos, IsInt: true, Int64: int64(cost), Text: fmt.Sprint(cost)}
		cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{id, dollar, num}}
		pipe := &parse.PipeNode{NodeType: parse.NodePipe, Pos: n.Pos, Line: n.Line, Cmds: []*parse.CommandNode{cmd}}
		n.List.Nodes = append([]parse.Node{&parse.ActionNode{NodeType: parse.NodeAction, Pos: n.Pos, Line: n.Line, Pipe: pipe}}, n.List.Nodes...)
	}
}

// countNodes counts the actions and text of a list, nested ones included.
func countNodes(n parse.Node) int {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return 0
		}
		c := 0
		for _, x := range n.Nodes {
			c += countNodes(x)
		}
		return c
	case *parse.IfNode:
		return 1 + countNodes(n.List) + countNodes(n.ElseList)
	case *parse.WithNode:
		return 1 + countNodes(n.List) + countNodes(n.ElseList)
	case *parse.RangeNode:
		return 1 + countNodes(n.List) + countNodes(n.ElseList)
	}
	return 1
}

func (p parsedFile) render(d *Data) ([]byte, error) {
	if p.tmpl == nil {
		return p.data, nil
	}
	w := &limitWriter{n: MaxFileOutput}
	d.steps = 0
	if err := p.tmpl.Execute(w, d); err != nil {
		switch {
		case errors.Is(err, errTooMuch):
			return nil, templateErr("%s: renders more than %d MiB", p.source, MaxFileOutput>>20)
		case errors.Is(err, errSteps):
			return nil, templateErr("%s: %s", p.source, errSteps)
		}
		return nil, templateErr("%s", strings.TrimPrefix(err.Error(), "template: "))
	}
	return w.buf.Bytes(), nil
}

// Renderer renders nodes' trees from the store, keeping parsed overlays
// and rendered trees between calls. Safe for concurrent use.
type Renderer struct {
	// Key unseals nodes' host keys and the munge key.
	Key pki.MasterKey
	// CAPEM is the cluster's CA bundle (.CA), asked at each render: a CA
	// rotation changes it.
	CAPEM func() []byte

	mu     sync.Mutex
	parsed map[string]parsedOverlay // by overlay name
	view   *view
	trees  map[string]cachedTree  // by machine + "/" + tree
	shared map[string]*sharedFile // node-independent templates' renderings (renderShared)

	// Records decoded, each kept while its table stands (mu).
	profiles    memoTable[store.Profile]
	clusterVars memoTable[store.ClusterVars]
	tagOverlays memoTable[[]string]
	mungeKey    memoTable[[]byte] // unsealed; the munge key's save touches the profiles table

	// building is held while the view is rebuilt: the fetches that find
	// it stale together wait for one rebuild instead of each making its
	// own (a rebuild reads every node's machine).
	building sync.Mutex
}

type parsedOverlay struct {
	sha     string
	files   []parsedFile
	checked uint64 // the overlays table's index when sha was read
}

type cachedTree struct {
	key   string
	files []File
	tar   *Tar
}

// view is the cluster's nodes as templates see them, rebuilt when a table
// it reads changes; digest is over the template data only, so a heartbeat
// (which changes the nodes table) rebuilds the view but keeps the trees.
// While the machines table is unchanged a rebuild takes each machine's
// part of its Node from the view before (a heartbeat reads no machine).
type view struct {
	indexes   [5]uint64
	nodes     []Node
	byMachine map[string]int
	records   map[string]store.StatelessNode
	digest    string
}

func (r *Renderer) currentView(tx *store.Tx) (*view, error) {
	idx := [5]uint64{tx.TableIndex(store.TableStatelessNodes), tx.TableIndex(store.TableMachines),
		tx.TableIndex(store.TableTags), tx.TableIndex(store.TableRacks), tx.TableIndex(store.TableProfiles)}
	current := func() *view {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.view
	}
	prev := current()
	if prev != nil && prev.indexes == idx {
		return prev, nil
	}
	r.building.Lock()
	defer r.building.Unlock()
	if prev = current(); prev != nil && prev.indexes == idx {
		return prev, nil // rebuilt while this one waited
	}
	ns, err := tx.StatelessNodes()
	if err != nil {
		return nil, err
	}
	sameMachines := prev != nil && prev.indexes[1] == idx[1] && prev.indexes[2] == idx[2] && prev.indexes[3] == idx[3]
	v := &view{indexes: idx, byMachine: make(map[string]int, len(ns)), records: make(map[string]store.StatelessNode, len(ns))}
	// A heartbeat changes a node's seen times only: while the machines
	// (and their tags and racks) stand and no node changed what templates
	// see of it, the nodes and their digest are the view before's.
	unchanged := sameMachines && len(ns) == len(prev.records)
	for _, n := range ns {
		unchanged = unchanged && sameForTemplates(prev.records[n.Machine], n)
		v.records[n.Machine] = n
	}
	if unchanged {
		v.nodes, v.byMachine, v.digest = prev.nodes, prev.byMachine, prev.digest
		r.mu.Lock()
		r.view = v
		r.mu.Unlock()
		return v, nil
	}
	for _, n := range ns {
		if sameMachines {
			if i, ok := prev.byMachine[n.Machine]; ok {
				v.nodes = append(v.nodes, prev.nodes[i].withNode(n))
				continue
			}
		}
		m, err := tx.Machine(n.Machine)
		if err != nil {
			continue // deleted under its node: not a node any more
		}
		v.nodes = append(v.nodes, nodeData(n, m))
	}
	slices.SortFunc(v.nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	for i, n := range v.nodes {
		v.byMachine[n.Machine] = i
	}
	b, _ := json.Marshal(v.nodes)
	sum := sha256.Sum256(b)
	v.digest = hex.EncodeToString(sum[:])
	r.mu.Lock()
	r.view = v
	r.mu.Unlock()
	return v, nil
}

// memoTable keeps values read from one table while the table's index
// (store.Tx.TableIndex) stays where it was when they were read: the
// records a rendering reads are decoded once per change, not per fetch.
type memoTable[V any] struct {
	at   uint64
	vals map[string]V
}

// memo is m's value for key at the table's index idx, loaded when the
// table changed since (or key was not read yet). Errors are not kept.
func memo[V any](r *Renderer, m *memoTable[V], idx uint64, key string, load func() (V, error)) (V, error) {
	r.mu.Lock()
	if v, ok := m.vals[key]; ok && m.at == idx {
		r.mu.Unlock()
		return v, nil
	}
	r.mu.Unlock()
	v, err := load()
	if err != nil {
		return v, err
	}
	r.mu.Lock()
	if m.at != idx || m.vals == nil {
		m.at, m.vals = idx, map[string]V{}
	}
	m.vals[key] = v
	r.mu.Unlock()
	return v, nil
}

// Node is a stateless node's record as the current view holds it (the
// view follows the nodes table, so it is the stored one), and false for a
// machine that is not a node.
func (r *Renderer) Node(tx *store.Tx, machine string) (store.StatelessNode, bool, error) {
	v, err := r.currentView(tx)
	if err != nil {
		return store.StatelessNode{}, false, err
	}
	n, ok := v.records[machine]
	return n, ok, nil
}

// sameForTemplates reports whether two records of a node give templates
// the same node (withNode's fields) for the same machine.
func sameForTemplates(a, b store.StatelessNode) bool {
	return a.Machine == b.Machine && a.Name == b.Name && a.Profile == b.Profile && a.Number == b.Number &&
		a.SSHHostKeyPub == b.SSHHostKeyPub && slices.Equal(a.Addresses, b.Addresses)
}

// overlay is an overlay parsed. While the overlays table is at the index
// it was last read at, the parsed one stands without reading the record
// (its files, every fetch).
func (r *Renderer) overlay(tx *store.Tx, name string) (parsedOverlay, error) {
	idx := tx.TableIndex(store.TableOverlays)
	r.mu.Lock()
	p, ok := r.parsed[name]
	r.mu.Unlock()
	if ok && p.checked == idx {
		return p, nil
	}
	o, err := tx.Overlay(name)
	if err != nil {
		return parsedOverlay{}, err
	}
	if ok && p.sha == o.SHA256 {
		p.checked = idx
	} else {
		files, err := Parse(o.Files)
		if err != nil {
			return parsedOverlay{}, err
		}
		p = parsedOverlay{sha: o.SHA256, files: files, checked: idx}
	}
	r.mu.Lock()
	if r.parsed == nil {
		r.parsed = map[string]parsedOverlay{}
	}
	r.parsed[name] = p
	r.mu.Unlock()
	return p, nil
}

// Target is what a rendering is for.
type Target struct {
	// Machine is the node's machine ID; "" renders the controller's view
	// of Profile.
	Machine string
	Profile string // with Machine "", the profile rendered
	// Secrets unseals the node's host key and the munge key (the node's
	// own fetch); without it they are placeholders (an operator's render).
	Secrets bool
}

// input is everything one rendering reads, and the key of its cache.
type input struct {
	data     Data
	overlays []string
	parsed   []parsedOverlay
	key      string
	// sharedKey is what a node-independent template reads (all of it but
	// the node).
	sharedKey string
	// secrets: the node's own rendering, whose secrets are unsealed
	// (from rec) only when it renders, not when its tree is cached.
	secrets bool
	rec     store.StatelessNode
}

func (r *Renderer) input(tx *store.Tx, t Target, override map[string]parsedOverlay) (*input, error) {
	v, err := r.currentView(tx)
	if err != nil {
		return nil, err
	}
	in := &input{}
	profile := t.Profile
	var rec store.StatelessNode
	if t.Machine != "" {
		var ok bool
		if rec, ok = v.records[t.Machine]; !ok {
			return nil, store.Errorf(store.ErrNotFound, "machine %s is not a stateless node", t.Machine)
		}
		profile = rec.Profile
		in.data.Node = v.nodes[v.byMachine[t.Machine]]
	}
	profiles := tx.TableIndex(store.TableProfiles)
	p, err := memo(r, &r.profiles, profiles, profile, func() (store.Profile, error) { return tx.Profile(profile) })
	if err != nil {
		return nil, err
	}
	in.data.Profile = Profile{Name: p.Name, Image: p.Image, Overlays: p.Overlays, Args: p.Args, Vars: p.Vars}
	in.data.Nodes = v.nodes
	cv, err := memo(r, &r.clusterVars, tx.TableIndex(store.TableClusterVars), "", tx.ClusterVars)
	if err != nil {
		return nil, err
	}
	in.data.ClusterVars = cv.Vars
	in.data.Vars = maps.Clone(cv.Vars)
	if in.data.Vars == nil {
		in.data.Vars = map[string]string{}
	}
	maps.Copy(in.data.Vars, p.Vars)
	if r.CAPEM != nil {
		in.data.CA = string(r.CAPEM())
	}
	in.overlays = slices.Clone(p.Overlays)
	tags := tx.TableIndex(store.TableTags)
	for _, tag := range in.data.Node.Tags {
		tagOverlays, err := memo(r, &r.tagOverlays, tags, tag, func() ([]string, error) {
			tg, err := tx.Tag(tag)
			return tg.Overlays, err
		})
		if err != nil {
			continue
		}
		for _, o := range tagOverlays {
			if !slices.Contains(in.overlays, o) {
				in.overlays = append(in.overlays, o)
			}
		}
	}
	// The profiles table's index is in the key: the munge key's first save
	// touches it.
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%t\x00%d\x00%d\x00%d\x00", v.digest, t.Machine, rec.Generation, t.Secrets, p.Index, cv.Index, profiles)
	for _, name := range in.overlays {
		po, ok := override[name]
		var err error
		if !ok {
			po, err = r.overlay(tx, name)
		}
		if err != nil {
			return nil, fmt.Errorf("overlay %s: %w", name, err)
		}
		in.parsed = append(in.parsed, po)
		fmt.Fprintf(h, "%s=%s\x00", name, po.sha)
	}
	in.key = hex.EncodeToString(h.Sum(nil))
	if t.Secrets && t.Machine != "" {
		in.secrets, in.rec = true, rec
	} else {
		if in.data.Node.Machine != "" {
			in.data.Node.SSHHostKey = RedactedHostKey
		}
		in.data.MungeKey = RedactedMunge
	}
	h.Reset()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%d", v.digest, p.Name, p.Index, cv.Index, profiles)
	in.sharedKey = hex.EncodeToString(h.Sum(nil))
	return in, nil
}

// unseal fills the node's own secrets.
func (r *Renderer) unseal(tx *store.Tx, n store.StatelessNode, d *Data) error {
	if len(n.SSHHostKeySealed) > 0 {
		k, err := r.Key.Open(n.SSHHostKeySealed, []byte(store.SSHHostKeyAAD(n.Machine)))
		if err != nil {
			return fmt.Errorf("node %s: cannot unseal its host key (a different master key?)", n.Name)
		}
		d.Node.SSHHostKey = string(k)
	}
	k, err := memo(r, &r.mungeKey, tx.TableIndex(store.TableProfiles), "", func() ([]byte, error) {
		mk, ok, err := tx.MungeKey()
		if err != nil || !ok {
			return nil, err
		}
		k, err := r.Key.Open(mk.Sealed, []byte(store.MungeKeyAAD))
		if err != nil {
			return nil, errors.New("cannot unseal the munge key (a different master key?)")
		}
		return k, nil
	})
	if err != nil {
		return err
	}
	d.MungeKey = string(k)
	return nil
}

// Tree renders one tree (store.TreeSystem or store.TreeRuntime) of a
// target: its files, sorted by path, a later overlay's replacing an
// earlier one's.
func (r *Renderer) Tree(tx *store.Tx, t Target, tree string) ([]File, error) {
	files, _, err := r.tree(tx, t, tree, false)
	return files, err
}

// Tar renders a node's tree as the tar its rollcall-overlay reads.
func (r *Renderer) Tar(tx *store.Tx, t Target, tree string) (Tar, error) {
	_, tb, err := r.tree(tx, t, tree, true)
	if err != nil {
		return Tar{}, err
	}
	return *tb, nil
}

func (r *Renderer) tree(tx *store.Tx, t Target, tree string, wantTar bool) ([]File, *Tar, error) {
	if tree != store.TreeSystem && tree != store.TreeRuntime {
		return nil, nil, store.Errorf(store.ErrInvalid, "tree %q: system or runtime", store.Clip(tree))
	}
	in, err := r.input(tx, t, nil)
	if err != nil {
		return nil, nil, err
	}
	ck := t.Machine + "/" + t.Profile + "/" + tree
	if t.Secrets {
		r.mu.Lock()
		c, ok := r.trees[ck]
		r.mu.Unlock()
		if ok && c.key == in.key && (!wantTar || c.tar != nil) {
			return c.files, c.tar, nil
		}
	}
	if in.secrets {
		if err := r.unseal(tx, in.rec, &in.data); err != nil {
			return nil, nil, err
		}
	}
	files, err := renderTree(in, tree, r)
	if err != nil {
		return nil, nil, err
	}
	var tb *Tar
	if wantTar {
		t, err := NewTar(files)
		if err != nil {
			return nil, nil, err
		}
		tb = &t
	}
	if t.Secrets {
		r.mu.Lock()
		if r.trees == nil {
			r.trees = map[string]cachedTree{}
		}
		r.trees[ck] = cachedTree{key: in.key, files: files, tar: tb}
		r.mu.Unlock()
	}
	return files, tb, nil
}

// Forget drops a machine's cached trees (unassigned).
func (r *Renderer) Forget(machine string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.trees {
		if strings.HasPrefix(k, machine+"/") {
			delete(r.trees, k)
		}
	}
}

// renderTree renders in's tree; with shared, the node-independent
// templates come from its renderShared (Trial renders without: it must
// not touch the caches).
func renderTree(in *input, tree string, shared *Renderer) ([]File, error) {
	byPath := map[string]File{}
	total := 0
	for i, po := range in.parsed {
		for _, f := range po.files {
			if f.tree != tree {
				continue
			}
			var b []byte
			var err error
			if shared != nil && f.shared {
				b, err = shared.renderShared(in, in.overlays[i], po.sha, f)
			} else {
				b, err = f.render(&in.data)
			}
			if err != nil {
				return nil, fmt.Errorf("overlay %s: %w", in.overlays[i], err)
			}
			if old, ok := byPath[f.path]; ok {
				total -= len(old.Data)
			}
			total += len(b)
			if total > MaxTreeOutput {
				return nil, templateErr("overlay %s: the %s tree renders more than %d MiB", in.overlays[i], tree, MaxTreeOutput>>20)
			}
			byPath[f.path] = File{Path: f.path, Mode: f.mode, Data: b, Overlay: in.overlays[i], Source: f.source}
		}
	}
	files := slices.Collect(maps.Values(byPath))
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	// A path that another needs as its directory: the later overlay's
	// file would be written over a directory or under a file.
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if o, ok := byPath[d]; ok {
				return nil, templateErr("%s (overlay %s) is a file, and %s (overlay %s) needs it as a directory", o.Source, o.Overlay, f.Source, f.Overlay)
			}
		}
	}
	return files, nil
}

// epoch is every tar entry's time: a tree's bytes depend on its content
// only.
var epoch = time.Unix(0, 0).UTC()

// Tar is a tree as a tar archive of regular files (the directories are
// implied; rollcall-overlay makes them 0755), held as pieces that follow
// one another: the headers, small files' contents, paddings and the end
// blocks gathered into buffers, and each large file's content by itself
// (the rendering, not a copy: a node-independent file's bytes are shared
// by every node's tar). Size is their total length.
type Tar struct {
	Pieces [][]byte
	Size   int64
}

const (
	blockSize = 512
	// ownPiece is the size from which a file's content is a piece of its
	// own rather than copied into the buffer around it.
	ownPiece = 16 << 10
)

// zeros pads a file's content to a block and ends the archive.
var zeros = make([]byte, 2*blockSize)

// NewTar lays files out as a Tar.
func NewTar(files []File) (Tar, error) {
	var t Tar
	var buf bytes.Buffer
	flush := func() {
		if buf.Len() > 0 {
			t.Pieces = append(t.Pieces, bytes.Clone(buf.Bytes()))
			t.Size += int64(buf.Len())
			buf.Reset()
		}
	}
	for _, f := range files {
		// A tar.Writer writes a header (PAX records included) as soon as
		// it is given.
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.Path, Mode: int64(f.Mode), Size: int64(len(f.Data)), ModTime: epoch, Format: tar.FormatPAX}
		if err := tar.NewWriter(&buf).WriteHeader(h); err != nil {
			return Tar{}, err
		}
		if len(f.Data) < ownPiece {
			buf.Write(f.Data)
		} else {
			flush()
			t.Pieces = append(t.Pieces, f.Data)
			t.Size += int64(len(f.Data))
		}
		buf.Write(zeros[:(blockSize-len(f.Data)%blockSize)%blockSize])
	}
	buf.Write(zeros)
	flush()
	return t, nil
}

// WriteTo writes the archive to w.
func (t Tar) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range t.Pieces {
		k, err := w.Write(p)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Bytes is the archive in one slice.
func (t Tar) Bytes() []byte {
	b := make([]byte, 0, t.Size)
	for _, p := range t.Pieces {
		b = append(b, p...)
	}
	return b
}

// Tarball writes files as a tar (NewTar's, in one slice).
func Tarball(files []File) ([]byte, error) {
	t, err := NewTar(files)
	if err != nil {
		return nil, err
	}
	return t.Bytes(), nil
}

// Lookup renders the file at p of a target for an operator: p is a path
// in a tree ("system/etc/hosts"), or an absolute path looked up in the
// system tree, then the runtime one ("/etc/hosts"). Secrets are
// placeholders.
func (r *Renderer) Lookup(tx *store.Tx, t Target, p string) (File, string, error) {
	t.Secrets = false
	trees := []string{store.TreeSystem, store.TreeRuntime}
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if tree, rest, ok := strings.Cut(rel, "/"); ok && (tree == store.TreeSystem || tree == store.TreeRuntime) && !strings.HasPrefix(p, "/") {
		trees, rel = []string{tree}, rest
	}
	rel = strings.TrimSuffix(rel, TemplateSuffix)
	for _, tree := range trees {
		files, err := r.Tree(tx, t, tree)
		if err != nil {
			return File{}, "", err
		}
		for _, f := range files {
			if f.Path == rel {
				return f, tree, nil
			}
		}
	}
	return File{}, "", store.Errorf(store.ErrNotFound, "no overlay of this node gives %s (looked in %s)", store.Clip(p), strings.Join(trees, " and "))
}

// Trial renders both trees of every target that would get overlay name
// if it held files (the profiles naming it, as the controller sees them;
// every node whose profile or tags name it), without secrets and without
// touching the caches: the API refuses an overlay that fails for one of
// them before it is stored.
func (r *Renderer) Trial(tx *store.Tx, name string, files []store.OverlayFile) error {
	parsed, err := Parse(files)
	if err != nil {
		return err
	}
	override := map[string]parsedOverlay{name: {sha: "trial", files: parsed}}
	ps, err := tx.Profiles()
	if err != nil {
		return err
	}
	var targets []Target
	for _, p := range ps {
		if slices.Contains(p.Overlays, name) {
			targets = append(targets, Target{Profile: p.Name})
		}
	}
	ns, err := tx.StatelessNodes()
	if err != nil {
		return err
	}
	for _, n := range ns {
		targets = append(targets, Target{Machine: n.Machine})
	}
	for _, t := range targets {
		in, err := r.input(tx, t, override)
		if err != nil {
			if errors.Is(err, ErrTemplate) {
				return err
			}
			continue // another overlay of the target is missing: not this one's fault
		}
		if !slices.Contains(in.overlays, name) {
			continue
		}
		for _, tree := range []string{store.TreeSystem, store.TreeRuntime} {
			if _, err := renderTree(in, tree, nil); err != nil {
				if t.Machine != "" {
					return fmt.Errorf("for node %s: %w", in.data.Node.Name, err)
				}
				return fmt.Errorf("for profile %s: %w", t.Profile, err)
			}
		}
	}
	return nil
}
