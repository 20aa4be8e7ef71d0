package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Dependencies point one way (STYLE.md item 1):
//
//	appliance/cmd/rollcall → appliance/cli → appliance → services (dhcp,
//	tftp, power, ipam, raftfsm, webui) → store → plain model types
//	(store/inventory)
//
// Services never import each other; the agent is a binary of its own that
// shares only the model; lab/ and images/ are programs at the edge that may
// use anything. The table below is the module as it is: every package has a
// rule naming exactly what of this module it imports, and why. A new import
// fails the test until its rule says so; an import gone fails it until its
// rule forgets it, so the table stays the truth. Every allowed import that
// goes against the direction is written once more in against, with why it
// stands.

const module = "github.com/rollcall/rollcall"

var update = flag.Bool("update", false, "rewrite testdata/agent-deps.txt from go list")

// rule says what one package may import of this module (paths relative to
// the module).
type rule struct {
	why     string
	imports []string // by its non-test files
	tests   []string // by its _test.go files, beyond imports
}

var rules = map[string]rule{
	// The model.
	"store/inventory": {why: "the hardware report's plain types, shared by the agent and the server: a leaf"},

	// The store.
	"store/binenc": {why: "the binary encoding of the store's hot records: a leaf"},
	"store": {why: "the data model on bbolt: only its own encoding and the model",
		imports: []string{"store/binenc", "store/inventory"}},
	"store/pgexport": {why: "copies the store into PostgreSQL: reads the store, nothing above it",
		imports: []string{"store", "store/inventory"},
		tests:   []string{"raftfsm", "raftfsm/fsmtest", "store/pgexport/pgtest"}},
	"store/tagrule": {why: "tags' match rules: parsed and evaluated over a machine record and its inventory facts, pure (the store's records and the model, no I/O)",
		imports: []string{"store", "store/inventory"},
		tests:   []string{"lab/fleet"}},
	"store/locationcsv": {why: "a site's location CSV planned against the store's machines and racks, pure (through an interface a store.Tx satisfies)",
		imports: []string{"store"},
		tests:   []string{"lab/fleet", "store/inventory"}},
	"store/pgexport/pgtest": {why: "test support: a PostgreSQL server, and the commands that commission generated machines",
		imports: []string{"lab/testenv", "raftfsm", "store/inventory"}},

	// Services: each reads the store and declares what it needs of the rest.
	"dhcp": {why: "the DHCP server: its mode packages and the store; leases are written through interfaces it declares",
		imports: []string{"dhcp/boot", "dhcp/full", "dhcp/lease", "dhcp/proxy", "dhcp/wire", "store"},
		tests:   []string{"lab/bench/dhcp/replica", "lab/testenv", "raftfsm"}},
	"dhcp/wire":  {why: "what the mode handlers share with the server that owns the sockets: a leaf"},
	"dhcp/boot":  {why: "the boot decision both modes make: only the shared wire types", imports: []string{"dhcp/wire"}},
	"dhcp/full":  {why: "full-mode DHCP: boot answers, leases, wire types", imports: []string{"dhcp/boot", "dhcp/lease", "dhcp/wire"}},
	"dhcp/proxy": {why: "proxy DHCP hands out no address, so no leases: boot answers and wire types", imports: []string{"dhcp/boot", "dhcp/wire"}},
	"dhcp/lease": {why: "dynamic addresses from the store's lease blocks",
		imports: []string{"store"},
		tests:   []string{"lab/bench/dhcp/replica"}},
	"tftp": {why: "a read-only file server: needs nothing of the module",
		tests: []string{"lab/testenv"}},
	"ipam": {why: "the network model's rules, as functions of a store transaction",
		imports: []string{"store"},
		tests:   []string{"raftfsm", "raftfsm/fsmtest", "store/inventory"}},
	"ipam/layout": {why: "interface layouts: parsed, resolved against a machine's inventory and the network model with ipam's " +
		"checks and picks (read only), rendered as cloud-init network-config and udev rules",
		imports: []string{"ipam", "store", "store/inventory"},
		tests:   []string{"lab/testenv", "raftfsm", "raftfsm/fsmtest"}},
	"raftfsm": {why: "the replicated state machine: commands are applied to the store under the network model's rules; " +
		"its proposer side evaluates tags' rules (store/tagrule) into the commands that carry their outcome",
		imports: []string{"ipam", "ipam/layout", "store", "store/binenc", "store/inventory", "store/tagrule"},
		tests:   []string{"lab/fleet", "raftfsm/fsmtest", "store/pgexport/pgtest"}},
	"raftfsm/cluster": {why: "the Raft node that feeds raftfsm's state machine: its transport, forwarding and membership",
		imports: []string{"raftfsm", "store"},
		tests:   []string{"appliance/pki", "lab/baseline", "raftfsm/fsmtest"}},
	"raftfsm/fsmtest": {why: "test support: the one harness that feeds synthetic log entries to the real FSM over a store",
		imports: []string{"raftfsm", "store"}},
	"webui": {why: "embedded static files: imports nothing of the module",
		tests: []string{"appliance/node", "appliance/nodetest", "appliance/overlay", "appliance/pki", "appliance/wire", "lab/fleet", "lab/testenv", "power/ipmi/ipmitest", "raftfsm/cluster", "store/inventory"}},
	"power": {why: "the Driver interface and the registry: a leaf every driver imports"},
	"power/builtin": {why: "names every driver this module ships, explicitly (STYLE.md item 13)",
		imports: []string{"power", "power/ipmi", "power/manual", "power/proxmox", "power/redfish"}},
	"power/ipmi": {why: "a driver: implements power's interface, nothing else",
		imports: []string{"power"},
		tests:   []string{"power/ipmi/ipmitest", "power/powertest"}},
	"power/redfish": {why: "a driver: implements power's interface, nothing else",
		imports: []string{"power"},
		tests:   []string{"power/powertest", "power/redfish/redfishtest"}},
	"power/proxmox": {why: "a driver: implements power's interface, nothing else",
		imports: []string{"power"},
		tests:   []string{"power/powertest"}},
	"power/manual": {why: "a driver: implements power's interface, nothing else", imports: []string{"power"}},
	"power/jobs": {why: "the BMC job runner: the queue is the store's jobs, written through raftfsm's job commands; " +
		"it drives BMCs through power's drivers (redfish for detection) and asks the cluster only through an interface it declares",
		imports: []string{"power", "power/redfish", "raftfsm", "store"},
		tests:   []string{"lab/bench/dhcp/replica", "power/builtin", "power/ipmi/ipmitest", "power/powertest", "power/redfish/redfishtest"}},
	"power/powertest":           {why: "test support: the conformance suite every driver runs", imports: []string{"lab/testenv", "power"}},
	"power/ipmi/ipmitest":       {why: "test support: simulated BMCs on go-ipmi's server, independent of the driver"},
	"power/redfish/redfishtest": {why: "test support: a Redfish service from DMTF mockups, independent of the driver"},

	// The node.
	"appliance": {why: "the package map of the node's sub-packages: documentation only, no code"},
	"appliance/node": {why: "composes the node: the only package that knows how the services fit together",
		imports: []string{"appliance/bootfiles", "appliance/boottoken", "appliance/connlimit", "appliance/httpapi", "appliance/oscatalog", "appliance/pki", "appliance/wire",
			"dhcp", "power", "power/builtin", "power/jobs", "raftfsm", "raftfsm/cluster", "store", "store/pgexport", "store/tagrule", "tftp"},
		tests: []string{"appliance/nodetest", "lab/testenv", "store/pgexport/pgtest"}},
	"appliance/cmd/rollcall": {why: "the server binary: main only, which runs the command line", imports: []string{"appliance/cli"}},
	"appliance/apiclient":    {why: "the API's HTTP client: speaks JSON over HTTP, a leaf"},
	"appliance/httpapi": {why: "the REST API: one file per resource over the store, proposing raftfsm's commands through a cluster interface it declares, " +
		"driving the BMC job runner, the boot-file side and the export; the store's refusals carry their public text; " +
		"tags' rules parsed before a save (store/tagrule) and location files planned (store/locationcsv) on the proposer's side",
		imports: []string{"appliance/bootfiles", "appliance/boottoken", "appliance/deploy", "appliance/oscatalog", "appliance/overlay", "appliance/pki", "appliance/wire", "ipam", "ipam/layout", "power", "power/jobs",
			"raftfsm", "raftfsm/cluster", "store", "store/inventory", "store/locationcsv", "store/pgexport", "store/tagrule", "webui"},
		tests: []string{"appliance/nodetest", "lab/fleet", "lab/testenv", "power/ipmi/ipmitest", "raftfsm/fsmtest"}},
	"appliance/nodetest": {why: "test support: starts real nodes (one or a cluster) and calls their API as a client would",
		imports: []string{"appliance/node", "appliance/boottoken", "appliance/pki", "appliance/wire", "raftfsm/cluster"}},
	"appliance/connlimit": {why: "connection limits for the node's HTTP servers: a leaf"},
	"appliance/boottoken": {why: "boot tokens, minted by the node for boot scripts and checked by the API: a leaf that declares the one method of the master key it uses",
		tests: []string{"appliance/pki"}},
	"appliance/pki": {why: "the cluster's cryptography: a leaf, so raftfsm and the lab can use it"},
	"appliance/bootfiles": {why: "the boot-file side (boot scripts, boot loaders, image files and their sync): " +
		"reads the store, proposes raftfsm's image commands, gives TFTP its allow-list; never the node, which it would cycle with",
		imports: []string{"raftfsm", "store", "tftp"}},
	"appliance/oscatalog": {why: "the OS image catalog's sync, import and prune: reads the store, writes blobs through bootfiles' blob store, " +
		"proposes raftfsm's OS commands through a cluster interface it declares",
		imports: []string{"appliance/bootfiles", "raftfsm", "store"},
		tests:   []string{"lab/testenv", "raftfsm/fsmtest"}},
	"appliance/overlay": {why: "stateless nodes' overlays rendered from the store's records (templates parsed once per change, trees cached by their inputs); " +
		"a node's secrets unsealed with the master key for its own tree only",
		imports: []string{"appliance/pki", "store"},
		tests:   []string{"lab/fleet", "raftfsm", "raftfsm/fsmtest", "store/pgexport/pgtest"}},
	"appliance/deploy": {why: "a deployment's decisions before anything is written (the disk, the cloud-init seed): pure functions of the store's records and the model",
		imports: []string{"store", "store/inventory"},
		tests:   []string{"lab/testenv"}},
	"appliance/wire": {why: "the API's request and answer types, written field by field: the model's plain types and nothing else, so every client can use them",
		imports: []string{"store/inventory"}},
	"appliance/console": {why: "an API client: the wire types for what the API answers, never the node or its store (setup is handed the node's name rule)",
		imports: []string{"appliance/apiclient", "appliance/pki", "appliance/wire"},
		tests:   []string{"appliance/nodetest", "lab/fleet", "store", "store/inventory"}},
	"appliance/cli": {why: "the command line: a client of the API (apiclient, wire) that starts a node (serve, setup) only through " +
		"appliance/node's exported API, never the other way round; the console for tui and setup; store's names and checks and " +
		"pgexport's DSN checks, to refuse bad input before it is sent; pki for keygen; the example overlays overlay import -example sends",
		imports: []string{"appliance/node", "appliance/apiclient", "appliance/console", "appliance/overlay", "appliance/pki", "appliance/wire", "store", "store/pgexport"},
		tests:   []string{"appliance/nodetest", "lab/fleet", "lab/testenv", "power/ipmi/ipmitest", "raftfsm", "store/inventory", "store/pgexport/pgtest"}},

	// The agent: its own small binary, which shares only the model with the server.
	"agent":                    {why: "the agent: reaches the server through the API only", imports: []string{"agent/bmc", "agent/collect", "agent/nodeenv", "store/inventory"}},
	"agent/bmc":                {why: "the in-band BMC account: the model's types only", imports: []string{"store/inventory"}},
	"agent/collect":            {why: "the inventory collectors: the model's types only", imports: []string{"store/inventory"}},
	"agent/sysinit":            {why: "PID 1 chores: a leaf"},
	"agent/deploy":             {why: "the deploy mode: a leaf that reaches the server through the Server interface it declares; its tests use the agent's real client", tests: []string{"agent", "lab/testenv"}},
	"agent/cmd/rollcall-agent": {why: "the agent binary: main only", imports: []string{"agent", "agent/deploy", "agent/nodeenv", "agent/sysinit", "agent/stateless"}},
	"agent/nodeenv":            {why: "a stateless node's settings (kernel arguments, node.env): a leaf the initrd and the overlay client share"},
	"agent/stateless":          {why: "the stateless mode: fetch the root into RAM, overlayfs, switch_root; the node settings only", imports: []string{"agent/nodeenv"}},
	"agent/cmd/rollcall-overlay": {why: "the overlay client in the stateless image: a binary of its own that links only the node settings",
		imports: []string{"agent/nodeenv"}},

	// The appliance ISO (issue 21).
	"buildroot/grubenv": {why: "GRUB's environment block, read and rewritten in place: a leaf", tests: []string{"lab/testenv"}},
	"buildroot/disklayout": {why: "the installed disk's GPT plan and the lookup by partition name: a leaf",
		tests: []string{"lab/deployimage/gpt", "lab/testenv"}},

	"buildroot": {why: "builds the ISO by running go build, grub-mkimage, mkfs.vfat, mtools and xorriso; the kernel from Debian's package and the initramfs writer the commissioning image uses",
		imports: []string{"images/debkernel", "images/initramfs"}, tests: []string{"lab/testenv"}},
	"buildroot/initsys": {why: "the ISO's PID 1: the agent's PID 1 chores (mounts, finit_module by modalias, netlink), the CA fingerprint's definition; rollcall itself runs as a process",
		imports: []string{"agent/sysinit", "appliance/pki"}},
	"buildroot/cmd/build-iso":     {why: "the ISO builder's command", imports: []string{"buildroot"}},
	"buildroot/cmd/rollcall-init": {why: "the ISO's /init: main only", imports: []string{"buildroot/initsys"}},

	// Programs and labs at the edge.
	"images/commissioning/build": {why: "builds the image: the kernel from Debian's package, Rollcall's initrd", imports: []string{"images/agentinitrd", "images/debkernel"}},
	"images/agentinitrd": {why: "Rollcall's initrd (the agent by go build, a kernel's modules, the initramfs writer), shared by the commissioning and the compute image",
		imports: []string{"images/debkernel", "images/initramfs"}, tests: []string{"lab/testenv"}},
	"images/debroot": {why: "a Debian root by mmdebstrap, made a template: a leaf the image builders share"},
	"images/compute-debian13": {why: "builds the stateless compute image: a Debian root, its kernel, Rollcall's initrd with the kernel's modules",
		imports: []string{"images/agentinitrd", "images/debkernel", "images/debroot"}},
	"images/debkernel": {why: "Debian's kernel package through apt-get download: a leaf the image builders share"},
	"images/initramfs": {why: "the reproducible newc writer: a leaf the image builders share", tests: []string{"lab/testenv"}},
	"lab/testenv":      {why: "test support: the skip-or-fail rule, a leaf every test may import"},
	"lab/layering":     {why: "this test: reads the module through go list"},
	"lab/e2e":          {why: "end to end: runs the real binaries", tests: []string{"lab/deployimage", "lab/deployimage/gpt", "lab/testenv"}},
	"lab/deployimage": {why: "builds the deploy tests' disk images from Debian's kernel (as the commissioning image) and tinyinit",
		imports: []string{"images/debkernel", "images/debroot", "images/initramfs", "lab/deployimage/gpt"},
		tests:   []string{"lab/testenv"}},
	"lab/deployimage/gpt":              {why: "reads a GPT: a leaf", tests: []string{"lab/testenv"}},
	"lab/deployimage/nocloud":          {why: "reads a NoCloud seed as cloud-init does: a leaf", tests: []string{"lab/testenv"}},
	"lab/deployimage/tinyinit":         {why: "the deploy test image's init: the agent's PID 1 chores, the GPT and seed readers", imports: []string{"agent/sysinit", "lab/deployimage/gpt", "lab/deployimage/nocloud"}},
	"lab/deployimage/cmd/deploy-image": {why: "the image builder's command", imports: []string{"lab/deployimage"}},
	"lab/statelessimage": {why: "builds the stateless test image's root (testinit, rollcall-overlay) with the initrd builder's go build",
		imports: []string{"images/agentinitrd"}, tests: []string{"lab/testenv"}},
	"lab/statelessimage/testinit":            {why: "the stateless test image's init: runs rollcall-overlay, prints markers; a leaf"},
	"lab/statelessimage/cmd/stateless-image": {why: "the stateless test image builder's command", imports: []string{"lab/statelessimage"}},
	"lab/fleet":                              {why: "test support: the fleet simulator, on the model's types", imports: []string{"store/inventory"}},
	"lab/baseline":                           {why: "test support: plain hashicorp/raft, which must not import raftfsm (raftfsm's tests import it)"},
	"lab/bench/deploy":                       {why: "a benchmark program: the deploy agent's pipeline against curl | zstd | dd", imports: []string{"agent", "agent/deploy"}},
	"lab/bench/dhcp":                         {why: "a benchmark program", imports: []string{"appliance/node", "dhcp", "lab/bench/dhcp/replica", "store"}},
	"lab/bench/dhcp/replica":                 {why: "a replicated store for DHCP and BMC job tests and benchmarks: FSMs fed one log", imports: []string{"dhcp/lease", "raftfsm", "store"}},
	"lab/bench/export":                       {why: "a benchmark program", imports: []string{"raftfsm", "raftfsm/fsmtest", "store", "store/pgexport", "store/pgexport/pgtest"}},
	"lab/bench/http":                         {why: "a benchmark program", imports: []string{"lab/bench/vsnginx"}},
	"lab/bench/stateless":                    {why: "a benchmark program", imports: []string{"appliance/overlay", "appliance/wire", "lab/bench/vsnginx", "lab/fleet", "store"}},
	"lab/bench/vsnginx":                      {why: "what the benchmarks against nginx share: nodes and nginx as child processes, the load client", imports: []string{"appliance/node", "store"}},
	"lab/bench/ipam":                         {why: "a benchmark program", imports: []string{"appliance/node", "appliance/wire"}},
	"lab/bench/machines":                     {why: "a benchmark program", imports: []string{"appliance/node", "lab/fleet"}},
	"lab/bench/power": {why: "a benchmark program",
		imports: []string{"power", "power/ipmi", "power/ipmi/ipmitest", "power/redfish", "power/redfish/redfishtest"}},
	"lab/bench/raft": {why: "a benchmark program", imports: []string{"appliance/pki", "lab/baseline", "raftfsm", "raftfsm/cluster", "store"}},
	"lab/bench/tftp": {why: "a benchmark program", imports: []string{"appliance/node", "tftp"}},
}

// edge is one allowed import: from imports to, in a _test.go file or not.
type edge struct {
	from, to string
	test     bool
}

// against holds the allowed imports that break the direction, each with why
// it stands. The test fails when the table allows such an import and it is
// not here, and when an entry here is no longer allowed or no longer against
// the direction.
var against = map[edge]string{
	{"lab/deployimage", "images/debkernel", false}: "the deploy test image boots the kernel the commissioning image boots, " +
		"fetched by the one piece of code that fetches it (both are programs at the edge)",
	{"lab/deployimage", "images/initramfs", false}: "the deploy test image's initrd is written by the commissioning image's " +
		"reproducible writer",
	{"lab/statelessimage", "images/agentinitrd", false}: "the stateless test image's binaries are built as the images' " +
		"binaries are, by the one go build that makes them reproducible (both are programs at the edge)",
	{"lab/deployimage", "images/debroot", false}: "the deploy tests' Debian root is made by the mmdebstrap recipe the " +
		"compute image is made by (both are programs at the edge)",
	{"raftfsm", "ipam", false}: "a service importing a service: Apply runs the network model's checks " +
		"(ipam.CheckVLAN, AddSubnet, Claim, …) on its transaction, so every node applies the same rules; ipam " +
		"keeps them as deterministic functions of a store.Tx and imports only store. Moving the rules below " +
		"both (into store, or a package of their own) would restore the direction",
	{"raftfsm", "ipam/layout", false}: "a service importing a service, as raftfsm → ipam: LayoutPut runs the layout " +
		"parser's checks (layout.Parse, CheckName) on every node before it writes; ipam/layout imports only ipam, " +
		"store and the model, never raftfsm",
	{"store/pgexport/pgtest", "raftfsm", false}: "test support under store/ reaching up: it builds the commands " +
		"that commission its generated machines (raftfsm.Commission), as the API does; only tests and lab/bench/export import it",
	{"store/pgexport", "raftfsm", true}: "the export's tests fill the store through the real FSM",
	{"raftfsm/cluster", "appliance/pki", true}: "the transport's tests use the real cluster CA and node certificates " +
		"(pki.NewCA, pki.PeerTLS); the cluster itself is handed a *tls.Config",
	{"dhcp", "raftfsm", true}: "the DHCP tests build machines and the network model with raftfsm commands " +
		"applied to real stores, as the cluster would",
	{"dhcp", "lab/bench/dhcp/replica", true}: "the replicated store the DHCP tests share with the " +
		"benchmark: several FSMs fed one log, so lease blocks behave as on a cluster",
	{"dhcp/lease", "lab/bench/dhcp/replica", true}: "leases are tested against the same replicated store",
	{"ipam", "raftfsm", true}:                      "ipam's rules are tested (and raced) as the cluster runs them, through commands",
	{"ipam/layout", "raftfsm", true}: "layouts are resolved over a network model and a commissioned machine built " +
		"through the real state machine's commands, as the cluster builds them",
	{"power/jobs", "raftfsm", false}: "a service importing a service: a job's progress is the replicated " +
		"record itself, so the runner proposes raftfsm's job commands (JobEnqueue, JobStart, JobFinish) whose " +
		"encoding raftfsm owns; it reaches the cluster only through the two methods its Cluster interface declares",
	{"power/jobs", "lab/bench/dhcp/replica", true}: "the runner's tests run several nodes on one replicated " +
		"store (FSMs fed one log, no network), so a job queued on one node and run on another behaves as on a cluster",
	{"buildroot/disklayout", "lab/deployimage/gpt", true}: "the plan written by sgdisk is read back by the deploy " +
		"image's GPT reader, an implementation independent of the planner",
	{"buildroot", "images/debkernel", false}: "the ISO boots the kernel the commissioning image boots, fetched by the " +
		"one piece of code that fetches it (both are programs at the edge)",
	{"buildroot", "images/initramfs", false}: "the ISO's initramfs is written by the commissioning image's reproducible writer",
	{"webui", "appliance/wire", true}: "the browser tests call a real node's API (appliance/nodetest) with its request types " +
		"and read its answers as the API's own types",
	{"webui", "appliance/overlay", true}: "the stateless browser test imports the example overlay the CLI's overlay import -example sends",
	{"webui", "appliance/pki", true}:     "the client-certificate browser test makes an administrator's key, CSR and .p12 with the code admin-cert request uses",
	{"webui", "appliance/node", true}:    "the client-certificate browser test starts its node with an HTTPS listener (node.Options)",
	{"webui", "raftfsm/cluster", true}:   "the client-certificate browser test shortens the version gate's report interval (cluster.Config) so the certificate commands open at once",
}

// testSupport are packages made for tests (and the lab's programs): tests of
// any package may import them, non-test code below lab/ may not.
var testSupport = map[string]bool{
	"lab/testenv": true, "lab/fleet": true, "lab/baseline": true,
	"power/powertest": true, "power/ipmi/ipmitest": true, "power/redfish/redfishtest": true,
	"store/pgexport/pgtest": true, "raftfsm/fsmtest": true, "appliance/nodetest": true,
}

// services are the packages between the node and the store.
var services = map[string]bool{"dhcp": true, "tftp": true, "power": true, "ipam": true, "raftfsm": true, "webui": true}

// layer places a package: its family (packages of one family import each
// other freely) and its level (imports go to a lower level).
func layer(p string) (family string, level int) {
	first, _, _ := strings.Cut(p, "/")
	switch {
	case p == "store/inventory":
		return "model", 0
	case first == "store":
		return "store", 1
	case services[first]:
		return first, 2
	case first == "appliance", first == "agent":
		return first, 3
	default: // lab/, images/: programs at the edge
		return first, 4
	}
}

func againstDirection(e edge) bool {
	ff, fl := layer(e.from)
	tf, tl := layer(e.to)
	if testSupport[e.to] {
		return !e.test && !testSupport[e.from] && ff != "lab"
	}
	return ff != tf && tl >= fl
}

// confinement names the only packages whose non-test files may import a
// module from outside.
type confinement struct {
	who []string
	why string
}

var confined = map[string]confinement{
	"github.com/gin-gonic/gin": {[]string{"appliance/httpapi"}, "only the REST API knows gin (STYLE.md item 1); services serve net/http"},
	"github.com/rivo/tview":    {[]string{"appliance/console"}, "the console is the one terminal UI"},
	"github.com/gdamore/tcell": {[]string{"appliance/console"}, "the console is the one terminal UI"},
	"github.com/hashicorp/raft": {[]string{"raftfsm", "raftfsm/cluster", "raftfsm/fsmtest", "lab/baseline", "lab/bench/dhcp/replica"},
		"raftfsm and its cluster own Raft; the others feed raft.Log entries to an FSM or are the plain-raft baseline"},
	"github.com/hashicorp/raft-boltdb": {[]string{"raftfsm/cluster", "lab/baseline"}, "raftfsm/cluster owns the Raft log"},
	"go.etcd.io/bbolt":                 {[]string{"store", "lab/baseline"}, "the store owns bbolt; everyone else reads typed records"},
	"github.com/chromedp":              {nil, "the headless browser drives webui's tests only"},
}

type table struct {
	rules    map[string]rule
	against  map[edge]string
	confined map[string]confinement
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestLayering(t *testing.T) {
	pkgs := goList(t, "-tags", "e2e", module+"/...")
	for _, p := range check(table{rules, against, confined}, pkgs) {
		t.Error(p)
	}
}

// check returns what is wrong with the module's imports against the table,
// one sentence each, sorted.
func check(tb table, pkgs []pkg) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	listed := map[string]pkg{}
	for _, p := range pkgs {
		if rel, ok := internal(p.ImportPath); ok {
			listed[rel] = p
		}
	}
	for name, r := range tb.rules {
		if _, ok := listed[name]; !ok {
			bad("the table has a rule for %s, which no longer exists: remove it", name)
		}
		for _, imp := range append(slices.Clone(r.imports), r.tests...) {
			if _, ok := listed[imp]; !ok {
				bad("the rule for %s allows %s, which no longer exists", name, imp)
			}
		}
	}
	for mod, c := range tb.confined {
		for _, who := range c.who {
			if _, ok := listed[who]; !ok {
				bad("%s is confined to %s, which no longer exists", mod, who)
			}
		}
	}

	allowed := map[edge]bool{}
	for name, p := range listed {
		r, ok := tb.rules[name]
		if !ok {
			bad("%s has no rule: add one to the table in lab/layering, with its reason", name)
			continue
		}
		prod := internalSet(name, p.Imports)
		test := internalSet(name, p.TestImports, p.XTestImports)
		for imp := range prod {
			delete(test, imp)
			if !slices.Contains(r.imports, imp) && !slices.Contains(r.tests, imp) { // else said below
				bad("%s imports %s, which its rule does not allow (%s)", name, imp, r.why)
			}
		}
		for imp := range test {
			if !slices.Contains(r.imports, imp) && !slices.Contains(r.tests, imp) {
				bad("%s's tests import %s, which its rule does not allow (%s)", name, imp, r.why)
			}
		}
		for _, imp := range r.imports {
			switch {
			case prod[imp]:
				allowed[edge{name, imp, false}] = true
			case test[imp]:
				bad("only the tests of %s import %s: move it to the rule's tests", name, imp)
			default:
				bad("%s no longer imports %s: remove it from its rule", name, imp)
			}
		}
		for _, imp := range r.tests {
			switch {
			case prod[imp]:
				bad("%s imports %s outside its tests: move it to the rule's imports", name, imp)
			case test[imp]:
				allowed[edge{name, imp, true}] = true
			default:
				bad("the tests of %s no longer import %s: remove it from its rule", name, imp)
			}
		}
		for _, imp := range p.Imports {
			for mod, c := range tb.confined {
				if (imp == mod || strings.HasPrefix(imp, mod+"/")) && !slices.Contains(c.who, name) {
					bad("%s imports %s: only %v may (%s)", name, imp, c.who, c.why)
				}
			}
		}
	}

	for e := range allowed {
		if againstDirection(e) && tb.against[e] == "" {
			bad("%s goes against the direction of STYLE.md item 1: say why in against, or drop the import", e)
		}
	}
	for e := range tb.against {
		switch {
		case !allowed[e]:
			bad("against names %s, which the table does not allow (or nobody imports): remove it", e)
		case !againstDirection(e):
			bad("against names %s, which follows the direction: remove it", e)
		}
	}
	slices.Sort(problems)
	return problems
}

func (e edge) String() string {
	if e.test {
		return fmt.Sprintf("%s (tests) → %s", e.from, e.to)
	}
	return fmt.Sprintf("%s → %s", e.from, e.to)
}

// internal returns path relative to the module, if it is in the module.
func internal(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

// internalSet is the module's packages among lists, self excluded (an
// external test package imports the package it tests).
func internalSet(self string, lists ...[]string) map[string]bool {
	set := map[string]bool{}
	for _, l := range lists {
		for _, p := range l {
			if rel, ok := internal(p); ok && rel != self {
				set[rel] = true
			}
		}
	}
	return set
}

// goList runs go list -json on patterns for linux/amd64 without cgo (how
// both binaries are built), so the answer does not depend on the machine.
// A failure of go list fails the test: a layering check that skips proves
// nothing.
func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Standard,Imports,TestImports,XTestImports"}, args...)...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: reading its output: %v", strings.Join(cmd.Args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("%s listed no packages", strings.Join(cmd.Args, " "))
	}
	return pkgs
}

// The agent binary's whole dependency set is checked in, so that a new
// dependency (one more module, or a server package) shows up in review. It
// holds every package linked in from this module and from other modules,
// and the standard library's importable packages; the standard library's
// internal and vendored packages are left out, since they change with each
// Go release and follow from the importable ones.
const agentMain = module + "/agent/cmd/rollcall-agent"

const agentDepsFile = "testdata/agent-deps.txt"

const agentDepsHeader = `# The agent binary's whole dependency set, one import path a line, sorted:
# go list -deps ` + agentMain + `
# for GOOS=linux GOARCH=amd64 CGO_ENABLED=0 (as images/commissioning/build
# builds it), less the standard library's internal and vendor packages.
# Checked by lab/layering; rewrite with
#   go test ./lab/layering -run TestAgentDeps -update
`

// agentNever are what the agent must not link, whatever agent-deps.txt says:
// it reaches the server through the API only.
var agentNever = map[string]string{
	"github.com/gin-gonic/gin":  "the API server's framework",
	"github.com/hashicorp/raft": "the cluster's consensus",
	"go.etcd.io/bbolt":          "the store's database",
}

func TestAgentDeps(t *testing.T) {
	checkDeps(t, agentMain, agentDepsFile, agentDepsHeader, func(rel string) bool {
		return rel == "agent" || strings.HasPrefix(rel, "agent/") || rel == "store/inventory"
	}, "of the server's packages it shares only store/inventory")
}

// The overlay client runs in every stateless node's image: it links the
// standard library and the node settings, nothing else (no module from
// outside, not the agent).
const overlayMain = module + "/agent/cmd/rollcall-overlay"

const overlayDepsFile = "testdata/overlay-deps.txt"

const overlayDepsHeader = `# The overlay client's whole dependency set, one import path a line, sorted:
# go list -deps ` + overlayMain + `
# for GOOS=linux GOARCH=amd64 CGO_ENABLED=0, less the standard library's
# internal and vendor packages. Checked by lab/layering; rewrite with
#   go test ./lab/layering -run TestOverlayDeps -update
`

func TestOverlayDeps(t *testing.T) {
	checkDeps(t, overlayMain, overlayDepsFile, overlayDepsHeader, func(rel string) bool {
		return rel == "agent/cmd/rollcall-overlay" || rel == "agent/nodeenv"
	}, "it links only agent/nodeenv of this module")
	for _, p := range goList(t, "-deps", overlayMain) {
		if _, ours := internal(p.ImportPath); !p.Standard && !ours {
			t.Errorf("the overlay client links %s: it needs no module from outside", p.ImportPath)
		}
	}
}

// checkDeps compares a binary's dependency set with its checked-in list
// (rewriting it with -update), and refuses what agentNever names and the
// module's packages ours does not allow.
func checkDeps(t *testing.T, main, file, header string, ours func(rel string) bool, why string) {
	var got []string
	for _, p := range goList(t, "-deps", main) {
		if !p.Standard || !hiddenStd(p.ImportPath) {
			got = append(got, p.ImportPath)
		}
	}
	slices.Sort(got)
	for _, p := range got {
		for never, reason := range agentNever {
			if p == never || strings.HasPrefix(p, never+"/") {
				t.Errorf("%s links %s (%s): it reaches the server through the API only", main, p, reason)
			}
		}
		if rel, ok := internal(p); ok && !ours(rel) {
			t.Errorf("%s links %s: %s", main, p, why)
		}
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(header+strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d packages", file, len(got))
		return
	}
	want, err := readList(file)
	if err != nil {
		t.Fatalf("%v (go test ./lab/layering -run 'TestAgentDeps|TestOverlayDeps' -update writes it)", err)
	}
	if diff := listDiff(want, got); diff != "" {
		t.Errorf("the dependencies of %s changed (+ new, - gone):\n%s"+
			"If that is meant, run go test ./lab/layering -run 'TestAgentDeps|TestOverlayDeps' -update and commit %s with the change.",
			main, diff, file)
	}
}

// hiddenStd reports a standard-library package no program can import.
func hiddenStd(path string) bool {
	for _, elem := range strings.Split(path, "/") {
		if elem == "internal" || elem == "vendor" {
			return true
		}
	}
	return false
}

// readList reads one entry a line, skipping blank lines and # comments.
func readList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var list []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			list = append(list, line)
		}
	}
	return list, sc.Err()
}

// listDiff is "+ x" for each x only in got and "- x" for each only in want,
// in order, one a line; "" when both hold the same.
func listDiff(want, got []string) string {
	var b strings.Builder
	for _, x := range got {
		if !slices.Contains(want, x) {
			fmt.Fprintf(&b, "+ %s\n", x)
		}
	}
	for _, x := range want {
		if !slices.Contains(got, x) {
			fmt.Fprintf(&b, "- %s\n", x)
		}
	}
	return b.String()
}

// TestCheck runs check on small made-up modules, one way to fail each.
func TestCheck(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	base := map[string]rule{
		"store":       {why: "the store"},
		"dhcp":        {why: "a service", imports: []string{"store"}},
		"tftp":        {why: "a service"},
		"appliance":   {why: "the node", imports: []string{"dhcp", "store"}, tests: []string{"lab/testenv"}},
		"lab/testenv": {why: "test support"},
	}
	pkgs := []pkg{
		{ImportPath: m("store"), Imports: []string{"os", "go.etcd.io/bbolt"}},
		{ImportPath: m("dhcp"), Imports: []string{m("store")}, XTestImports: []string{m("dhcp"), m("store")}},
		{ImportPath: m("tftp")},
		{ImportPath: m("appliance"), Imports: []string{m("dhcp"), m("store")}, TestImports: []string{m("lab/testenv"), m("store")}},
		{ImportPath: m("lab/testenv")},
		{ImportPath: "os", Standard: true},
	}
	with := func(rules map[string]rule, name string, r rule) map[string]rule {
		out := map[string]rule{}
		for k, v := range rules {
			out[k] = v
		}
		if r.why == "" {
			delete(out, name)
		} else {
			out[name] = r
		}
		return out
	}
	importing := func(name string, imports, tests []string) []pkg {
		out := slices.Clone(pkgs)
		for i := range out {
			if out[i].ImportPath == m(name) {
				out[i].Imports, out[i].TestImports = append(slices.Clone(out[i].Imports), imports...), append(slices.Clone(out[i].TestImports), tests...)
			}
		}
		return out
	}
	dhcpTFTP := edge{"dhcp", "tftp", false}
	cases := map[string]struct {
		tb   table
		pkgs []pkg
		want []string
	}{
		"clean": {table{base, nil, nil}, pkgs, nil},
		"import not allowed": {table{base, nil, nil}, importing("dhcp", []string{m("tftp")}, nil),
			[]string{"dhcp imports tftp, which its rule does not allow (a service)"}},
		"test import not allowed": {table{base, nil, nil}, importing("tftp", nil, []string{m("appliance")}),
			[]string{"tftp's tests import appliance, which its rule does not allow (a service)"}},
		"package without a rule": {table{base, nil, nil}, append(slices.Clone(pkgs), pkg{ImportPath: m("ipam")}),
			[]string{"ipam has no rule: add one to the table in lab/layering, with its reason"}},
		"rule for a package gone": {table{with(base, "power", rule{why: "gone"}), nil, nil}, pkgs,
			[]string{"the table has a rule for power, which no longer exists: remove it"}},
		"allowance of a package gone": {table{with(base, "tftp", rule{why: "a service", tests: []string{"lab/gone"}}), nil, nil}, pkgs,
			[]string{"the rule for tftp allows lab/gone, which no longer exists", "the tests of tftp no longer import lab/gone: remove it from its rule"}},
		"import gone": {table{with(base, "tftp", rule{why: "a service", imports: []string{"store"}}), nil, nil}, pkgs,
			[]string{"tftp no longer imports store: remove it from its rule"}},
		"test import in imports": {table{with(base, "tftp", rule{why: "a service", imports: []string{"store"}}), nil, nil}, importing("tftp", nil, []string{m("store")}),
			[]string{"only the tests of tftp import store: move it to the rule's tests"}},
		"import in tests": {table{with(base, "tftp", rule{why: "a service", tests: []string{"store"}}), nil, nil}, importing("tftp", []string{m("store")}, nil),
			[]string{"tftp imports store outside its tests: move it to the rule's imports"}},
		"against the direction, unexplained": {table{with(base, "dhcp", rule{why: "a service", imports: []string{"store", "tftp"}}), nil, nil}, importing("dhcp", []string{m("tftp")}, nil),
			[]string{"dhcp → tftp goes against the direction of STYLE.md item 1: say why in against, or drop the import"}},
		"against the direction, explained": {table{with(base, "dhcp", rule{why: "a service", imports: []string{"store", "tftp"}}), map[edge]string{dhcpTFTP: "because"}, nil}, importing("dhcp", []string{m("tftp")}, nil),
			nil},
		"explanation of an import gone": {table{base, map[edge]string{dhcpTFTP: "because"}, nil}, pkgs,
			[]string{"against names dhcp → tftp, which the table does not allow (or nobody imports): remove it"}},
		"explanation of an import that follows the direction": {table{base, map[edge]string{{"appliance", "dhcp", false}: "because"}, nil}, pkgs,
			[]string{"against names appliance → dhcp, which follows the direction: remove it"}},
		"test support outside tests": {table{with(base, "tftp", rule{why: "a service", imports: []string{"lab/testenv"}}), nil, nil}, importing("tftp", []string{m("lab/testenv")}, nil),
			[]string{"tftp → lab/testenv goes against the direction of STYLE.md item 1: say why in against, or drop the import"}},
		"confined module": {table{base, nil, map[string]confinement{"go.etcd.io/bbolt": {[]string{"dhcp"}, "not the store"}}}, pkgs,
			[]string{"store imports go.etcd.io/bbolt: only [dhcp] may (not the store)"}},
		"confined to a package gone": {table{base, nil, map[string]confinement{"go.etcd.io/bbolt": {[]string{"store", "gone"}, "x"}}}, pkgs,
			[]string{"go.etcd.io/bbolt is confined to gone, which no longer exists"}},
	}
	for name, c := range cases {
		if diff := cmp.Diff(c.want, check(c.tb, c.pkgs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestListDiff(t *testing.T) {
	if d := listDiff([]string{"a", "b", "c"}, []string{"a", "c", "d"}); d != "+ d\n- b\n" {
		t.Errorf("listDiff = %q", d)
	}
	if d := listDiff([]string{"a"}, []string{"a"}); d != "" {
		t.Errorf("listDiff of equal lists = %q", d)
	}
}
