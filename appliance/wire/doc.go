// Package wire holds what the management API says: every request body and
// every answer of /api/v1 (and the node-to-node join), as structs of their
// own. The handlers encode them, the CLI, the console and the web UI's tests
// decode them, and the OpenAPI document is built from them, so a client and
// the server cannot drift apart on a shape.
//
// No type here embeds or names a store record (STYLE.md item 20): a field
// added to store.Machine, a secret or not, reaches a client only once someone
// writes it into the wire type and into its conversion in package appliance
// (wireconv.go), whose test fails until every field of every record is
// carried or left out on purpose. The package imports only the standard
// library and the plain model types of store/inventory.
//
// Field order is the order the API has always sent (encoding/json follows
// it): where an answer used to be a map, the fields are in the map's sorted
// key order.
package wire
