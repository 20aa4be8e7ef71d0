// Package httpapi is the node's REST API: the route table (routes.go), one
// file per resource (machines, agent, cluster, network, power, images,
// export, boot tokens, health), the authentication middleware, the index
// protocol (min_index, blocking queries) and the OpenAPI document built
// from the same table.
//
// A Server is built from a Config the node fills (its store, its cluster
// through the Cluster interface, the services the handlers drive, the
// settings of rollcall.json) and serves Handler on every listener.
// Handlers return error, and one error path (Failer) turns it into
// {status, public message}, logging the cause with the route and the
// request ID: the public text is written where the error is made (Errorf,
// BadRequest, Wrap, or a store refusal's own text), never cut out of
// err.Error().
package httpapi
