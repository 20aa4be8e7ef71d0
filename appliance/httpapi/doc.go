// Package httpapi is the node's REST API: the route table, one file per
// resource, and the one error path every handler returns through (Fail):
// an error becomes {status, public message}, its cause goes to the log with
// the route and the request ID.
package httpapi
