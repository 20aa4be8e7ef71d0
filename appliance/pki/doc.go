// Package pki owns Rollcall's cluster cryptography: the cluster certificate
// authority and the node certificates it signs, the TLS configurations nodes
// use to talk to each other, the one-word join codes that let a new node find
// and trust the cluster, the master key that seals secrets at rest, and
// bearer tokens.
//
// Nothing in this package logs. Secret material (private keys, join secrets,
// the master key, tokens) is never put into error strings, and the types that
// hold secrets redact themselves when formatted, so an error or a log line can
// be passed around freely.
package pki
