package console

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/appliance/wire"
)

// Source is what the console reads and does: the management API, seen from
// a client. *Client implements it over HTTP; tests use a fixed fleet.
type Source interface {
	// Machines is GET /api/v1/machines; with index > 0 it blocks until the
	// machines table moves past index or wait passes.
	Machines(ctx context.Context, index uint64, wait time.Duration) (wire.MachineList, error)
	Machine(ctx context.Context, id string) (wire.MachineDetail, error)
	Jobs(ctx context.Context, id string) ([]wire.Job, error)
	// Events are the fleet's recent events, newest first, at most limit.
	Events(ctx context.Context, limit int) ([]wire.Event, error)
	Cluster(ctx context.Context) (wire.ClusterView, error)
	Network(ctx context.Context) (Network, error)
	Images(ctx context.Context) ([]wire.Image, error)
	// Racks is GET /api/v1/racks; Rack one rack with its elevation.
	Racks(ctx context.Context) ([]wire.Rack, error)
	Rack(ctx context.Context, name string) (wire.RackDetail, error)
	// Tags is GET /api/v1/tags; Tag one tag with its machines.
	Tags(ctx context.Context) ([]wire.Tag, error)
	Tag(ctx context.Context, name string) (wire.TagDetail, error)
	// Profiles is GET /api/v1/profiles: the stateless profiles.
	Profiles(ctx context.Context) ([]wire.Profile, error)
	// StatelessNodes is GET /api/v1/stateless/nodes; with index > 0 it
	// blocks until the nodes move past index or wait passes.
	StatelessNodes(ctx context.Context, index uint64, wait time.Duration) (wire.StatelessNodeList, error)
	// OS is the OS image catalog (GET /api/v1/os).
	OS(ctx context.Context) (wire.OSList, error)
	// DeployJobs are a machine's deploy and release jobs, newest first;
	// with index > 0 it blocks until they move past index or wait passes.
	DeployJobs(ctx context.Context, id string, index uint64, wait time.Duration) (wire.DeployJobList, error)
	// Plan is GET /api/v1/machines/{id}/network-plan: the layout it uses
	// and why, the NICs chosen, the addresses (what rollcall net show
	// prints); an error says why it has none.
	Plan(ctx context.Context, id string) (wire.NetworkPlan, error)
	// Doctor is GET /api/v1/doctor: the checks of the node the console
	// asks, each ok, warn or fail with what to do (rollcall doctor).
	Doctor(ctx context.Context) (wire.DoctorReport, error)
	// CA is GET /api/v1/ca: the cluster's current root and the roots a
	// rotation replaced that are still trusted.
	CA(ctx context.Context) (wire.CAState, error)
	// Access is who may act and what they did: the certificates the
	// cluster CA recorded (GET /api/v1/ca/certificates) and the newest
	// audit events (GET /api/v1/audit).
	Access(ctx context.Context) (wire.CertList, wire.AuditLog, error)
	// Do runs one action on one machine and returns what the API said in a
	// few words (a power state, a job result).
	Do(ctx context.Context, a Action) (string, error)
}

// Clock may be implemented by a Source to fix the time the console shows
// (recorded dumps and golden tests); the console uses time.Now otherwise.
type Clock interface{ Now() time.Time }

// Action is one thing done to one machine.
type Action struct {
	Machine string // ID
	Kind    string // power, bootdev, recommission, delete, deploy, release, cancel, rename, bmc-clear, assign, unassign
	Arg     string // power: on|off|soft|cycle|reset|status; bootdev: pxe|disk|cdrom|bios|none; recommission: "" or "now"; deploy: OS[@VERSION]; release: quick|full; rename: the new name; assign: PROFILE, or PROFILE+boot to power-cycle it too
}

// Network is the network model, as GET /api/v1/fabrics, /vlans and /subnets
// answer it.
type Network struct {
	Fabrics []wire.Fabric
	VLANs   []wire.VLAN
	Subnets []wire.SubnetView
}
