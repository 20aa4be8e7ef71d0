package httpapi

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store/inventory"
	"github.com/rollcall/rollcall/webui"
)

// Auth is who may call a route.
type Auth string

const (
	AuthNone  Auth = "none"
	AuthAdmin Auth = "admin"
	AuthAgent Auth = "agent" // the shared agent token or a boot token
	AuthBoot  Auth = "boot"  // a boot token only: acts on its own machine
	AuthJob   Auth = "job"   // a deploy or release job's token (X-Rollcall-Job)
	AuthNode  Auth = "node"  // a stateless node's token (X-Rollcall-Node)
)

// Route is one API endpoint. The table is the single source for the router
// and the OpenAPI document (openapi.go); a test checks both agree.
type Route struct {
	Method  string
	Path    string // gin syntax (:id)
	Auth    Auth
	Summary string
	Body    any // example request body type, for the document
	handler Handler
}

// Routes is the route table: what the router serves and the document
// describes.
func (s *Server) Routes() []Route { return s.routes() }

func (s *Server) routes() []Route {
	return slices.Concat(s.coreRoutes(), s.bootRoutes(), s.powerRoutes(), s.net.routes(), s.layoutRoutes(), s.osRoutes(), s.tagRoutes(), s.locationRoutes(), s.deployRoutes(), s.statelessRoutes(), s.doctorRoutes(), s.certRoutes(), s.auditRoutes())
}

func (s *Server) coreRoutes() []Route {
	ui := wrap(webui.Handler())
	return []Route{
		{"GET", "/", AuthNone, "the web UI (redirects to /ui/)", nil, ui},
		{"GET", "/ui/*path", AuthNone, "the web UI: HTML, CSS and JavaScript modules embedded in the binary", nil, ui},
		{"GET", "/metrics", AuthNone, "Prometheus metrics", nil, wrap(promhttp.HandlerFor(s.cfg.Metrics, promhttp.HandlerOpts{}))},
		{"GET", "/ca.pem", AuthNone, "the cluster CA certificates, the current one first, then any still trusted after a rotation (check it by its SHA-256)", nil, s.getCA},
		{"GET", "/api/v1/health", AuthNone, "node, leader, applied index, ok", nil, s.getHealth},
		{"GET", "/api/v1/openapi.json", AuthNone, "this document", nil, s.getOpenAPI},

		{"POST", "/api/v1/enlist", AuthAgent, "agent's first contact: find or create the machine, move it to commissioning", wire.EnlistRequest{}, s.postEnlist},
		{"POST", "/api/v1/commission", AuthBoot, "inventory upload from the commissioning agent; moves the machine to ready", commissionExample(), s.postCommission},
		{"GET", "/api/v1/bmc-hint", AuthBoot, "out-of-band BMC hint for the booted machine's own MACs (?macs=a,b; at most 8)", nil, s.getBMCHint},
		{"POST", "/api/v1/boot-tokens", AuthAdmin, "mint the agent token a boot script hands one MAC", wire.BootTokenRequest{}, s.postBootToken},

		{"GET", "/api/v1/cluster", AuthAdmin, "members, voters, leader, applied index, last contact", nil, s.getCluster},
		{"GET", "/api/v1/ca", AuthNone, "the cluster CA: fingerprint, subject, serial, validity, path length and PEM, and the roots a rotation replaced that are still trusted (public, as /ca.pem)", nil, s.getCAView},
		{"POST", "/api/v1/cluster/join-codes", AuthAdmin, "a one-time join code for a new node", wire.JoinCodeRequest{}, s.postJoinCode},
		{"DELETE", "/api/v1/cluster/members/:name", AuthAdmin, "remove a node from the cluster", nil, s.deleteMember},
		{"POST", "/api/v1/cluster/members/:name/repair", AuthAdmin, "rebuild a node's store from the leader's (after a consistency check found it damaged)", nil, s.postRepair},
		{"POST", "/api/v1/cluster/check", AuthAdmin, "consistency check now: every node hashes its store at one index and compares", nil, s.postCheck},

		{"GET", "/api/v1/machines", AuthAdmin, "machine summaries (?state= ?q= ?tag= (manual or auto) ?rack= ?limit=&after= pages, next in the answer; ?index=&wait= blocks, at most 512 per node; ?min_index=; gzip when accepted)", nil, s.listMachines},
		{"POST", "/api/v1/machines", AuthAdmin, "add a machine by hand (state new)", wire.CreateMachineRequest{}, s.createMachine},
		{"GET", "/api/v1/machines/:id", AuthAdmin, "full record: inventory, BMC (no secret), events", nil, s.getMachine},
		{"DELETE", "/api/v1/machines/:id", AuthAdmin, "forget a machine", nil, s.deleteMachine},
		{"POST", "/api/v1/machines/:id/rename", AuthAdmin, "give a machine a new name (a DNS label no other machine holds)", wire.RenameMachineRequest{}, s.postRename},
		{"GET", "/api/v1/machines/:id/events", AuthAdmin, "a machine's history", nil, s.getEvents},
		{"GET", "/api/v1/events", AuthAdmin, "the fleet's newest events (?limit=, default 100; ?index=&wait=)", nil, s.getRecentEvents},
		{"POST", "/api/v1/machines/:id/recommission", AuthAdmin, "boot the commissioning image again on next PXE (?now=1: via the BMC at once)", nil, s.postRecommission},
	}
}

func (s *Server) bootRoutes() []Route {
	b := s.cfg.Boot
	return []Route{
		{"GET", "/boot/ipxe", AuthNone, "the iPXE script for a machine (?mac=), rendered from its state", nil, wrap(http.HandlerFunc(b.ServeIPXE))},
		{"GET", "/boot/:file", AuthNone, "an iPXE binary for UEFI HTTP boot (ipxe.efi, snponly.efi, undionly.kpxe, ipxe-arm64.efi)", nil, bootHandler(b.ServeLoader)},
		{"HEAD", "/boot/:file", AuthNone, "an iPXE binary's size (UEFI HTTP boot asks with HEAD first)", nil, bootHandler(b.ServeLoader)},
		{"GET", "/images/:name/:file", AuthNone, "an image file (kernel, initrd, squashfs); Range and HEAD supported", nil, bootHandler(b.ServeImageFile)},
		{"HEAD", "/images/:name/:file", AuthNone, "an image file's size and ETag", nil, bootHandler(b.ServeImageFile)},
		{"GET", "/api/v1/images", AuthAdmin, "boot images with their files and the nodes that hold them", nil, s.listImages},
		{"POST", "/api/v1/images", AuthAdmin, "record an image from files uploaded to this node", wire.ImageRequest{}, s.postImage},
		{"GET", "/api/v1/images/:name", AuthAdmin, "one image", nil, s.getImage},
		{"DELETE", "/api/v1/images/:name", AuthAdmin, "forget an image", nil, s.deleteImage},
		{"PUT", "/api/v1/images/:name/files/:file", AuthAdmin, "upload one file of an image (raw body)", nil, s.putImageFile},
	}
}

func (s *Server) powerRoutes() []Route {
	return []Route{
		{"POST", "/api/v1/machines/:id/power", AuthAdmin, "power action through the BMC: on, off, soft, cycle, reset, status", wire.PowerRequest{}, s.postPower},
		{"POST", "/api/v1/machines/:id/bootdev", AuthAdmin, "set the boot device: pxe, disk, cdrom, bios, none (persistent, uefi)", wire.BootdevRequest{}, s.postBootdev},
		{"PUT", "/api/v1/machines/:id/bmc", AuthAdmin, "set the BMC (driver, address, user, password, settings); verify or probe it", wire.BMCRequest{}, s.putBMC},
		{"DELETE", "/api/v1/machines/:id/bmc", AuthAdmin, "forget the BMC: driver, address, user, settings and the sealed password; the machine is then powered by hand", nil, s.deleteBMC},
		{"GET", "/api/v1/machines/:id/jobs", AuthAdmin, "a machine's BMC jobs and its deploy and release jobs, newest first (?index=&wait= blocks on the deploy jobs)", nil, s.getJobs},
		{"GET", "/api/v1/bmc/drivers", AuthAdmin, "the BMC drivers this appliance knows", nil, s.getBMCDrivers},
		{"POST", "/api/v1/export/postgres", AuthAdmin, "copy this node's store into PostgreSQL (one snapshot, one transaction)", wire.ExportRequest{}, s.postExport},
		{"GET", "/api/v1/export/status", AuthAdmin, "the PostgreSQL mirror's position and lag", nil, s.getExportStatus},
	}
}

// wrap mounts a plain net/http handler: it writes every answer itself.
func wrap(h http.Handler) Handler {
	return func(c *gin.Context) error {
		h.ServeHTTP(c.Writer, c.Request)
		return nil
	}
}

// bootHandler mounts one of bootfiles' handlers: gin's path parameters
// become the request's path values, and a refusal takes the one error
// path, with the public message bootfiles wrote (bootfilesErrors).
func bootHandler(h func(http.ResponseWriter, *http.Request) error) Handler {
	return func(c *gin.Context) error {
		for _, p := range c.Params {
			c.Request.SetPathValue(p.Key, p.Value)
		}
		return h(c.Writer, c.Request)
	}
}

// commissionExample is the request body shown in the OpenAPI document.
func commissionExample() inventory.Report {
	return inventory.Report{Version: inventory.SchemaVersion}
}
