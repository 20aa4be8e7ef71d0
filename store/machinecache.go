package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// machineCache keeps machine records decoded, each beside the bytes it
// was decoded from. A record is used only while the bytes in the store
// are exactly those bytes, so the cache can never answer with anything
// but what decoding the record would: a rolled-back write, a restored
// snapshot or a record written by any other path simply misses.
//
// It exists for commands that rewrite a fleet: a tag save over 10,000
// machines spent half its apply decoding records it had itself written
// a moment before, and every node's machine list decoded them once more.
// A write puts what it encoded, so the next read of that record is a
// comparison and a copy.
type machineCache struct {
	mu   sync.Mutex
	recs map[string]cachedMachine
}

type cachedMachine struct {
	raw []byte // the record as stored; never changed
	m   Machine
}

// maxCachedMachines bounds the cache: ten times the fleets the
// benchmarks run. Past it the cache starts over.
const maxCachedMachines = 100_000

func newMachineCache() *machineCache {
	return &machineCache{recs: map[string]cachedMachine{}}
}

// get returns a copy of the machine decoded from raw, if it is cached.
func (c *machineCache) get(id string, raw []byte) (Machine, bool) {
	c.mu.Lock()
	e, ok := c.recs[id]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.raw, raw) {
		return Machine{}, false
	}
	return e.m.clone(), true
}

// put caches m as decoded from raw; both are the cache's from now on.
func (c *machineCache) put(id string, raw []byte, m Machine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.recs[id]; !ok && len(c.recs) >= maxCachedMachines {
		clear(c.recs)
	}
	c.recs[id] = cachedMachine{raw: raw, m: m}
}

func (c *machineCache) drop(id string) {
	c.mu.Lock()
	delete(c.recs, id)
	c.mu.Unlock()
}

// decodeMachine decodes the record raw of machine id, through the cache
// when the transaction has one. raw is bbolt's memory: it is copied
// before it is kept.
func (t *Tx) decodeMachine(id string, raw []byte) (Machine, error) {
	if t.machines != nil {
		if m, ok := t.machines.get(id, raw); ok {
			return m, nil
		}
	}
	var m Machine
	if err := json.Unmarshal(raw, &m); err != nil {
		return Machine{}, fmt.Errorf("decode %s/%s: %w", bucketMachines, id, err)
	}
	if t.machines != nil {
		t.machines.put(id, bytes.Clone(raw), m.clone())
	}
	return m, nil
}

// clone is a copy of m that shares no memory with it: a caller may
// change anything in the machine it was handed.
func (m Machine) clone() Machine {
	c := m
	c.MACs = slices.Clone(m.MACs)
	c.IPs = slices.Clone(m.IPs)
	c.Tags = slices.Clone(m.Tags)
	c.AutoTags = slices.Clone(m.AutoTags)
	c.Summary.GPUModels = slices.Clone(m.Summary.GPUModels)
	if m.BMC != nil {
		b := *m.BMC
		b.PasswordSealed = bytes.Clone(m.BMC.PasswordSealed)
		b.Settings = maps.Clone(m.BMC.Settings)
		b.Errors = slices.Clone(m.BMC.Errors)
		c.BMC = &b
	}
	return c
}

// decodesAs returns m as decoding its encoding gives it back, with ok,
// when that can be told without decoding: empty lists and maps become
// nil (omitempty drops them). It refuses (ok false) a machine with a
// time that is not plain UTC (a monotonic reading or a zone: decoding
// gives another Location) or a string that is not valid UTF-8 (encoding
// replaces the bad bytes). m is changed in place: pass a clone.
// TestDecodesAs checks it against encoding/json.
func (m Machine) decodesAs() (Machine, bool) {
	for _, t := range []time.Time{m.CreatedAt, m.UpdatedAt, m.LastSeen, m.Commissioned} {
		if !plainUTC(t) {
			return m, false
		}
	}
	// Arrays and checks in place: a write of 10,000 machines calls this
	// for each.
	fields := [...]string{m.ID, m.Name, m.State, m.SystemUUID, m.Serial, m.BootMAC, m.IdentityKey, m.Layout,
		m.Summary.Manufacturer, m.Summary.Product, m.Summary.CPUModel, m.Summary.TPM,
		m.Location.Building, m.Location.Room, m.Location.Rack, m.Location.AssetTag}
	if !validUTF8(fields[:]) || !validUTF8(m.MACs) || !validUTF8(m.IPs) || !validUTF8(m.Tags) ||
		!validUTF8(m.AutoTags) || !validUTF8(m.Summary.GPUModels) {
		return m, false
	}
	m.MACs, m.IPs, m.Tags, m.AutoTags = nilIfEmpty(m.MACs), nilIfEmpty(m.IPs), nilIfEmpty(m.Tags), nilIfEmpty(m.AutoTags)
	m.Summary.GPUModels = nilIfEmpty(m.Summary.GPUModels)
	if b := m.BMC; b != nil {
		bf := [...]string{b.Driver, b.Address, b.MAC, b.User, b.PasswordAAD, b.CertSHA256, b.Source}
		if !plainUTC(b.UpdatedAt) || !validUTF8(bf[:]) || !validUTF8(b.Errors) {
			return m, false
		}
		for k, v := range b.Settings {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return m, false
			}
		}
		b.Errors = nilIfEmpty(b.Errors)
		if len(b.PasswordSealed) == 0 {
			b.PasswordSealed = nil
		}
		if len(b.Settings) == 0 {
			b.Settings = nil
		}
	}
	return m, true
}

// plainUTC: t encodes and decodes to itself (UTC, no monotonic reading).
func plainUTC(t time.Time) bool {
	return t.Location() == time.UTC && t == t.Round(0)
}

func validUTF8(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}
