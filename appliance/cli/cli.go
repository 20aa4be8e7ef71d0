// Package cli is the rollcall command line: Main and its table of verbs,
// one file per noun (machine, cluster, network, image, power, export,
// boot-token, serve, console). Every client verb finds the API the same way
// and parses its flags with one helper (parseFlags, flags before or after
// the arguments), then prints the answer with one helper (fetch: the API's
// JSON with -json, else a table). It starts a node only through package
// appliance's exported API, and is no part of the node.
//
// The verbs, their flags, what they print and their exit codes are what
// operators' scripts rely on: change none of them by accident.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rollcall/rollcall/appliance/console"
)

const usage = `rollcall: bare-metal commissioning appliance

Node:
  rollcall serve [-data DIR] [-name NAME] [-http ADDR] [-https ADDR] [-tftp ADDR] [-raft ADDR]
                 [-raft-advertise ADDR] [-join CODE] [-config FILE]
  rollcall keygen                      print a fresh random token

Cluster:
  rollcall cluster join-code [-ttl 60m]  print a one-time code for a new node
  rollcall cluster status [-json]        members, voters, leader, applied index, last contact
  rollcall cluster remove NAME           remove a node from the cluster
  rollcall cluster check                 every node hashes its store at one index and compares
  rollcall cluster repair NAME           rebuild a damaged node's store from the leader's
  rollcall ca show [-json]               the cluster CA: SHA-256 fingerprint, subject, validity, PEM
  rollcall ca issue NAME -host h1,h2 [-client] [-dir DIR]   a certificate for another service (key made here)
  rollcall ca intermediate NAME -permit dom,cidr -csr FILE  a name-constrained intermediate CA, one level
  rollcall ca certs [-kind K] [-json]    every certificate the CA recorded, with its state
  rollcall ca revoke SERIAL              revoke one recorded certificate
  rollcall admin-cert request NAME [-url https://HOST:PORT] [-dir DIR]
                                         an administrator's certificate (admin:NAME): key made here, only a
                                         CSR sent; writes it, a .p12 for the browser, and the client config
  rollcall admin-cert list [-json]       administrators' certificates
  rollcall admin-cert revoke NAME [-serial S]   refused on every node from the next request
  rollcall audit [-limit N] [-json]      who did what, from where, with what outcome (newest first)
  rollcall doctor [-json]                the node's checks (Raft, members' clocks, services, disk,
                                         certificates, commissioning image, DHCP interfaces); exit 1 on a failure

Machines:
  rollcall list [-state S] [-q TEXT] [-tag T] [-rack R] [-json] [-watch]
  rollcall show ID|NAME [-json]
  rollcall events ID|NAME [-json]
  rollcall recommission ID|tag:NAME [-now] [-json]
  rollcall deploy ID|tag:NAME OS [-version V] [-disk D] [-hostname H] [-upgrade] [-packages a,b] [-user-data FILE] [-ssh-key FILE] [-boot] [-watch] [-json]
  rollcall release ID|tag:NAME [-wipe quick|full] [-boot] [-watch] [-json]
  rollcall jobs ID [-watch] [-json]
  rollcall job cancel JOB|MACHINE
  rollcall power ID|tag:NAME status|on|off|soft|cycle|reset [-json]
  rollcall bootdev ID|tag:NAME pxe|disk|cdrom|bios|none [-persistent] [-uefi] [-json]
  rollcall bmc ID -driver D -address A -user U -password - [-set k=v] [-verify] [-probe]
  rollcall bmc clear ID|NAME [-json]    forget the BMC and its sealed password
  rollcall bmc drivers
  rollcall add [-name NAME] [-mac MAC]
  rollcall machine rename ID|NAME NEWNAME [-json]
  rollcall boot-token MAC [-ttl 6h] [-json]   the agent token a boot script hands that MAC
  rollcall delete ID|NAME

Tags and location (tag:NAME: every machine that carries the tag):
  rollcall tags add NAME [-match RULE] [-cloud-config FILE] [-overlays a,b] [-layout L] [-comment C]
  rollcall tags set NAME [same flags: only those given change] | rm NAME | list | show NAME
  rollcall tag ID|tag:NAME +add -remove [+add …]     manual tags (each must exist)
  rollcall location ID|tag:NAME [-building B] [-room R] [-rack K] [-unit U] [-height H] [-asset A]
  rollcall location import FILE.csv [-dry]            header: id|serial|mac|node_name, building, room, rack, unit, height, asset_tag
  rollcall location racks | rack NAME [-building B] [-room R] [-height H]   (rack NAME alone: its elevation)
  (every one takes -json)

Network (fabric → VLAN → subnet → ranges, addresses):
  rollcall fabric add NAME [-kind ethernet|infiniband] | list | show NAME | rm NAME
  rollcall vlan add FABRIC VID [-dhcp|-proxy-dhcp] [-node NAME -iface IF] [-mtu N] | list | show FABRIC VID | rm FABRIC VID
  rollcall subnet add CIDR -fabric F -vid V -purpose P [-gateway G] [-dns D,D] [-domain D] | list | show CIDR | rm CIDR [-force]
  rollcall range add CIDR dynamic|reserved|static FIRST LAST | list [-subnet CIDR] | rm FIRST
  rollcall ip list [-subnet CIDR] | reserve ADDR -name N | release ADDR
  (every list and show takes -json)

Interfaces (layouts: physical, bond, vlan; NICs by selectors):
  rollcall layout add NAME FILE.json [-comment T] | set NAME FILE.json | rm NAME | list | show NAME
  rollcall net set ID|NAME [-layout L] [-static IFACE=ADDR ...] [-no-static]   -layout "" clears it
  rollcall net show ID|NAME [-json]    the plan: layout and why, NICs chosen, addresses, network-config, udev rules

Stateless nodes (boot an image into RAM, files from overlays; docs/stateless.md):
  rollcall profile add NAME -image IMG [-overlays a,b] [-args A] [-name-format node%03d] [-first N] [-last N] [-subnets CIDR,…] [-var K=V]…
  rollcall profile set NAME [the same flags; -unset-var K] | rm NAME | list | show NAME
  rollcall overlay import NAME DIR | import NAME -example | list | show NAME [-files] | rm NAME
  rollcall overlay export NAME DIR [-force]    its files written back (DIR/system/…, DIR/runtime/…, modes kept)
  rollcall assign ID|tag:NAME PROFILE [-boot]   a node name, addresses, a host key; -boot power-cycles it
  rollcall unassign ID|tag:NAME                 back to ready, name and addresses freed
  rollcall render PROFILE PATH [-node NAME]     what a node (or the controller) gets at PATH
  rollcall nodes                                names, addresses, booted, last seen, stale
  rollcall cluster vars [set K=V… | rm K…]      the variables every template sees
  (every one takes -json)

Boot images:
  rollcall image import NAME -kernel F -initrd F [-squashfs F]   upload to one node; the others fetch and verify
  rollcall image list [-json] | rm NAME

OS images (the catalog deployments write to disk):
  rollcall os list [-json]                               versions, current, sizes, hashes, nodes holding each
  rollcall os sync [NAME…] [-force]                      fetch os_sources' checksum files; download what changed
  rollcall os import NAME FILE|URL [-family debian|rhel] a qcow2 or raw image, uploaded or fetched by the node
  rollcall os promote NAME VERSION | rm NAME VERSION

Export:
  rollcall export postgres -dsn URL [-schema rollcall] [-data DIR]   copy the store into PostgreSQL
  rollcall export status                                             the continuous mirror's position and lag

Console:
  rollcall [tui] [-data DIR]             full-screen console (a bare rollcall in a terminal)
  rollcall tui -dump 140x40 [-page P] [-plain]   render one screen to stdout
  rollcall setup [-data DIR]             first-boot setup on the appliance's screen, then the console

Client commands reach the API at $ROLLCALL_URL with $ROLLCALL_TOKEN; on a node
they read both from the data directory ($ROLLCALL_DATA or ./var, or -data DIR).
An https:// URL is checked against the cluster CA: $ROLLCALL_CA (a PEM file), or
the data directory's tls/ca.pem on a node.
`

// streams are what a verb reads and writes.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// verb is one command of the table.
type verb struct {
	run func(args []string, s streams) error
	// screen: the verb draws its own screen or only logs, so its stdout is
	// the terminal's; every other verb prints data through printableWriter.
	screen bool
}

// verbs are the command line's verbs, by the word that names them.
var verbs = map[string]verb{
	// serve.go
	"serve":  {run: cmdServe, screen: true},
	"keygen": {run: cmdKeygen},
	// console.go
	"tui":   {run: cmdTUI, screen: true},
	"setup": {run: cmdSetup, screen: true},
	// cluster.go
	"cluster": {run: cmdCluster},
	"doctor":  {run: cmdDoctor}, // doctor.go
	"ca":      {run: cmdCA},     // ca.go
	// certs.go
	"admin-cert": {run: cmdAdminCert},
	"audit":      {run: cmdAudit},
	// machine.go
	"list":         {run: cmdList},
	"show":         {run: cmdShow},
	"add":          {run: cmdAdd},
	"delete":       {run: cmdDelete},
	"events":       {run: cmdEvents},
	"recommission": {run: cmdRecommission},
	"machine":      {run: cmdMachine},
	// tags.go, location.go
	"tags":     {run: cmdTags},
	"tag":      {run: cmdTag},
	"location": {run: cmdLocation},
	// power.go
	"power":   {run: cmdPower},
	"bootdev": {run: cmdBootdev},
	"bmc":     {run: cmdBMC},
	// image.go, export.go, boottoken.go
	"image":      {run: cmdImage},
	"os":         {run: cmdOS}, // os.go
	"export":     {run: cmdExport},
	"boot-token": {run: cmdBootToken},
	// deploy.go
	"deploy":  {run: cmdDeploy},
	"release": {run: cmdRelease},
	"jobs":    {run: cmdJobs},
	"job":     {run: cmdJob},
	// network.go
	"fabric": {run: network("fabric")},
	"vlan":   {run: network("vlan")},
	"subnet": {run: network("subnet")},
	// layout.go, net.go
	"layout": {run: cmdLayout},
	"net":    {run: cmdNet},
	"range":  {run: network("range")},
	// stateless.go
	"profile":  {run: cmdProfile},
	"assign":   {run: cmdAssign},
	"unassign": {run: cmdUnassign},
	"overlay":  {run: cmdOverlay},
	"render":   {run: cmdRender},
	"nodes":    {run: cmdNodes},
	"ip":       {run: network("ip")},
}

// Main runs the rollcall command line and returns the exit status: 0 when
// the verb did what it was asked, 1 when it failed (the error on stderr), 2
// for an unknown verb or -h.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if in, ok := stdin.(*os.File); ok && len(args) == 0 {
		if out, ok := stdout.(*os.File); ok && console.Interactive(in, out) {
			args = []string{"tui"} // a bare rollcall in a terminal opens the console
		}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, rest := args[0], args[1:]
	v, ok := verbs[cmd]
	if !ok {
		fmt.Fprintf(stderr, "rollcall: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if !v.screen {
		stdout = &printableWriter{w: stdout}
	}
	if err := v.run(rest, streams{stdin, stdout, stderr}); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "rollcall %s: %v\n", cmd, err)
		return 1
	}
	return 0
}
