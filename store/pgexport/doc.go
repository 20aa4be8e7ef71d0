// Package pgexport copies the store into PostgreSQL for reporting: once
// (Export, a consistent snapshot loaded with COPY in one transaction) or
// continuously (Mirror, which applies each committed change from the store's
// change log and keeps the last exported Raft index in PostgreSQL beside
// the rows, so that a restart, an outage or a new leader resumes without
// loss). A node runs its Mirror through a Runner (runner.go), which holds
// the postgres_export settings of rollcall.json and runs the mirror only
// while the node leads.
//
// The relational schema is generated from the store's Go types by
// reflection (schema.go): a field added to store.Machine or to an
// inventory section becomes a column, and a field of a kind the generator
// does not know stops the export with the field's name until it is mapped.
// Every table and column carries a COMMENT. Secrets never leave the store:
// the sealed BMC password and what it is bound to are not columns, the
// inventory document is exported without the BMC password, a stateless
// node's sealed SSH host key and the cluster's munge key are not exported,
// and an overlay's files are exported without their content (their size
// and SHA-256 only).
//
// The schema belongs to the exporter: a layout change (a new version or a
// new field) drops and recreates its tables and reloads them, which is
// cheap because every row is derived from the store.
package pgexport
