package appliance

import (
	"errors"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/webui"
)

// authKind is who may call a route.
type authKind string

const (
	authNone  authKind = "none"
	authAdmin authKind = "admin"
	authAgent authKind = "agent" // the shared agent token or a boot token
	authBoot  authKind = "boot"  // a boot token only: acts on its own machine
)

func (a authKind) middleware(n *Node) []gin.HandlerFunc {
	switch a {
	case authAdmin:
		return []gin.HandlerFunc{n.requireAdmin}
	case authAgent:
		return []gin.HandlerFunc{n.requireAgent(false)}
	case authBoot:
		return []gin.HandlerFunc{n.requireAgent(true)}
	}
	return nil
}

// route is one API endpoint. The table is the single source for the router
// and the OpenAPI document (openapi.go); a test checks both agree.
type route struct {
	Method  string
	Path    string // gin syntax (:id)
	auth    authKind
	Summary string
	Body    any // example request body type, for the document
	handler gin.HandlerFunc
}

func (n *Node) routes() []route {
	return slices.Concat(n.coreRoutes(), n.bootRoutes(), n.powerRoutes(), n.networkRoutes())
}

func (n *Node) coreRoutes() []route {
	return []route{
		{"GET", "/", authNone, "the web UI (redirects to /ui/)", nil, gin.WrapH(webui.Handler())},
		{"GET", "/ui/*path", authNone, "the web UI: HTML, CSS and JavaScript modules embedded in the binary", nil, gin.WrapH(webui.Handler())},
		{"GET", "/metrics", authNone, "Prometheus metrics", nil, gin.WrapH(promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{}))},
		{"GET", "/ca.pem", authNone, "the cluster CA certificate (check it by its SHA-256)", nil, n.getCA},
		{"GET", "/api/v1/health", authNone, "node, leader, applied index, ok", nil, n.getHealth},
		{"GET", "/api/v1/openapi.json", authNone, "this document", nil, n.getOpenAPI},

		{"POST", "/api/v1/enlist", authAgent, "agent's first contact: find or create the machine, move it to commissioning", wire.EnlistRequest{}, n.postEnlist},
		{"POST", "/api/v1/commission", authBoot, "inventory upload from the commissioning agent; moves the machine to ready", commissionExample(), n.postCommission},
		{"GET", "/api/v1/bmc-hint", authBoot, "out-of-band BMC hint for the booted machine's own MACs (?macs=a,b; at most 8)", nil, n.getBMCHint},
		{"POST", "/api/v1/boot-tokens", authAdmin, "mint the agent token a boot script hands one MAC", wire.BootTokenRequest{}, n.postBootToken},

		{"GET", "/api/v1/cluster", authAdmin, "members, voters, leader, applied index, last contact", nil, n.getCluster},
		{"POST", "/api/v1/cluster/join-codes", authAdmin, "a one-time join code for a new node", wire.JoinCodeRequest{}, n.postJoinCode},
		{"DELETE", "/api/v1/cluster/members/:name", authAdmin, "remove a node from the cluster", nil, n.deleteMember},
		{"POST", "/api/v1/cluster/members/:name/repair", authAdmin, "rebuild a node's store from the leader's (after a consistency check found it damaged)", nil, n.postRepair},
		{"POST", "/api/v1/cluster/check", authAdmin, "consistency check now: every node hashes its store at one index and compares", nil, n.postCheck},

		{"GET", "/api/v1/machines", authAdmin, "machine summaries (?state= ?q= ?limit=&after= pages, next in the answer; ?index=&wait= blocks, at most 512 per node; ?min_index=; gzip when accepted)", nil, n.listMachines},
		{"POST", "/api/v1/machines", authAdmin, "add a machine by hand (state new)", wire.CreateMachineRequest{}, n.createMachine},
		{"GET", "/api/v1/machines/:id", authAdmin, "full record: inventory, BMC (no secret), events", nil, n.getMachine},
		{"DELETE", "/api/v1/machines/:id", authAdmin, "forget a machine", nil, n.deleteMachine},
		{"GET", "/api/v1/machines/:id/events", authAdmin, "a machine's history", nil, n.getEvents},
		{"GET", "/api/v1/events", authAdmin, "the fleet's newest events (?limit=, default 100; ?index=&wait=)", nil, n.getRecentEvents},
		{"POST", "/api/v1/machines/:id/recommission", authAdmin, "boot the commissioning image again on next PXE (?now=1: via the BMC at once)", nil, n.postRecommission},
	}
}

func (n *Node) bootRoutes() []route {
	return []route{
		{"GET", "/boot/ipxe", authNone, "the iPXE script for a machine (?mac=), rendered from its state", nil, gin.WrapF(n.boot.ServeIPXE)},
		{"GET", "/boot/:file", authNone, "an iPXE binary for UEFI HTTP boot (ipxe.efi, snponly.efi, undionly.kpxe, ipxe-arm64.efi)", nil, n.bootHandler(n.boot.ServeLoader)},
		{"HEAD", "/boot/:file", authNone, "an iPXE binary's size (UEFI HTTP boot asks with HEAD first)", nil, n.bootHandler(n.boot.ServeLoader)},
		{"GET", "/images/:name/:file", authNone, "an image file (kernel, initrd, squashfs); Range and HEAD supported", nil, n.bootHandler(n.boot.ServeImageFile)},
		{"HEAD", "/images/:name/:file", authNone, "an image file's size and ETag", nil, n.bootHandler(n.boot.ServeImageFile)},
		{"GET", "/api/v1/images", authAdmin, "boot images with their files and the nodes that hold them", nil, n.listImages},
		{"POST", "/api/v1/images", authAdmin, "record an image from files uploaded to this node", wire.ImageRequest{}, n.postImage},
		{"GET", "/api/v1/images/:name", authAdmin, "one image", nil, n.getImage},
		{"DELETE", "/api/v1/images/:name", authAdmin, "forget an image", nil, n.deleteImage},
		{"PUT", "/api/v1/images/:name/files/:file", authAdmin, "upload one file of an image (raw body)", nil, n.putImageFile},
	}
}

// bootHandler mounts one of bootfiles' handlers: gin's path parameters
// become the request's path values, and a refusal takes the API's one
// error path, with the public message bootfiles wrote.
func (n *Node) bootHandler(h func(http.ResponseWriter, *http.Request) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, p := range c.Params {
			c.Request.SetPathValue(p.Key, p.Value)
		}
		if err := h(c.Writer, c.Request); err != nil {
			var be *bootfiles.Error
			if errors.As(err, &be) {
				err = &apiError{Status: be.Status, Code: be.Code, Message: be.Message}
			}
			n.fail(c, err)
		}
	}
}

func (n *Node) powerRoutes() []route {
	return []route{
		{"POST", "/api/v1/machines/:id/power", authAdmin, "power action through the BMC: on, off, soft, cycle, reset, status", wire.PowerRequest{}, n.postPower},
		{"POST", "/api/v1/machines/:id/bootdev", authAdmin, "set the boot device: pxe, disk, cdrom, bios, none (persistent, uefi)", wire.BootdevRequest{}, n.postBootdev},
		{"PUT", "/api/v1/machines/:id/bmc", authAdmin, "set the BMC (driver, address, user, password, settings); verify or probe it", wire.BMCRequest{}, n.putBMC},
		{"GET", "/api/v1/machines/:id/jobs", authAdmin, "a machine's BMC jobs, newest first", nil, n.getJobs},
		{"GET", "/api/v1/bmc/drivers", authAdmin, "the BMC drivers this appliance knows", nil, n.getBMCDrivers},
		{"POST", "/api/v1/export/postgres", authAdmin, "copy this node's store into PostgreSQL (one snapshot, one transaction)", wire.ExportRequest{}, n.postExport},
		{"GET", "/api/v1/export/status", authAdmin, "the PostgreSQL mirror's position and lag", nil, n.getExportStatus},
	}
}
