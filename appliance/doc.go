// Package appliance is the Rollcall node and everything it serves, in
// sub-packages by job. The root package holds no code: the binary starts in
// appliance/cmd/rollcall, which runs the command line (appliance/cli).
//
//	node        wiring: opens the store and the cluster, builds every service, runs and stops them
//	httpapi     the REST API: route table, one file per resource, the one error path
//	wire        the API's request and answer types, written field by field
//	cli         the command line, one file per noun, a client of the API
//	console     the terminal UI on the appliance's screen, a client of the API
//	bootfiles   what a machine fetches to boot: scripts, loaders, image files, blob sync
//	boottoken   the per-boot agent token, minted and checked by any node
//	pki         the cluster's keys, certificates and join codes
//	apiclient   the API's HTTP client
//	connlimit   connection limits for the node's HTTP servers
//	nodetest    test support: start nodes and call their API
package appliance
