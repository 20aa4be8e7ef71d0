package raftfsm

import (
	"maps"
	"slices"
	"testing"
)

// pinnedTypes is every command type byte ever given out, written as numbers
// on purpose: a type's number is in every log entry and snapshot of it, so
// renumbering, reusing or removing one breaks every cluster that has it in
// its log. maxVersion moves only up, with a new body version (and golden).
var pinnedTypes = map[string]struct {
	number     Type
	maxVersion uint8
}{
	"noop":  {0, 1},
	"batch": {1, 1},

	"cluster-init":  {10, 1},
	"node-put":      {11, 1},
	"node-remove":   {12, 1},
	"join-code-add": {13, 1},
	"join-code-use": {14, 1},

	"machine-create": {20, 1},
	"machine-delete": {21, 1},
	"machine-event":  {22, 1},
	"machine-enlist": {23, 2},
	"commission":     {24, 3},
	"recommission":   {25, 1},

	"fabric-put":      {40, 1},
	"fabric-delete":   {41, 1},
	"vlan-put":        {42, 1},
	"vlan-delete":     {43, 1},
	"subnet-put":      {44, 1},
	"subnet-delete":   {45, 1},
	"range-put":       {46, 1},
	"range-delete":    {47, 1},
	"address-claim":   {48, 1},
	"address-release": {49, 1},

	"lease-block-claim":   {60, 1},
	"lease-block-renew":   {61, 1},
	"lease-block-release": {62, 1},
	"lease-batch":         {63, 2},
	"lease-expire":        {64, 1},

	"image-put":    {80, 1},
	"image-delete": {81, 1},
	"image-have":   {82, 1},

	"job-enqueue": {90, 1},
	"job-start":   {91, 1},
	"job-finish":  {92, 1},
	"bmc-set":     {93, 1},
	"bmc-clear":   {94, 1},

	"layout-put":    {110, 1},
	"layout-delete": {111, 1},
	"tag-put":       {100, 1},
	"tag-delete":    {101, 1},
	"machine-tags":  {102, 1},
	"auto-tags-set": {103, 1},
	"location-set":  {104, 1},
	"rack-put":      {105, 1},
	"rack-delete":   {106, 1},

	"machine-net-set":   {107, 1},
	"machine-rename":    {108, 1},
	"os-version-add":    {120, 1},
	"os-promote":        {121, 1},
	"os-version-remove": {122, 1},
	"os-image-set":      {123, 1},
	"os-have":           {124, 1},
	"os-image-delete":   {125, 1},
	"os-prune":          {126, 1},
	"os-sync-start":     {127, 1},
	"os-sync-end":       {128, 1},
	"deploy-start":      {130, 1},
	"release-start":     {131, 1},
	"job-report":        {132, 1},
	"job-cancel":        {133, 1},
	"job-timeout":       {134, 1},
	"phone-home":        {135, 1},
	"profile-put":       {140, 1},
	"profile-delete":    {141, 1},
	"assign":            {142, 1},
	"unassign":          {143, 1},
	"overlay-put":       {144, 1},
	"overlay-delete":    {145, 1},
	"stateless-seen":    {146, 1},
	"munge-key-set":     {147, 1},
	"cluster-vars-set":  {148, 1},

	"node-versions": {150, 1},
	"gate-open":     {151, 1},
	"gate-probe":    {152, 2},

	"cert-put":    {50, 1},
	"cert-revoke": {51, 1},
	"audited":     {52, 1},
	"ca-rotate":   {53, 1},

	// Ignorable (FlagIgnorable, 0x80): a node that does not know it skips it.
	"state-check": {0x8A, 1},
}

func TestCommandTypesPinned(t *testing.T) {
	byNumber := map[Type]string{}
	for _, name := range slices.Sorted(maps.Keys(pinnedTypes)) {
		p := pinnedTypes[name]
		if other, dup := byNumber[p.number]; dup {
			t.Errorf("pinned table: %s and %s share type %d", other, name, p.number)
		}
		byNumber[p.number] = name
		info, ok := commands[p.number]
		switch {
		case !ok:
			t.Errorf("%s (type %d) is not registered: a type that was ever in a log stays decodable, and its number is never reused", name, p.number)
		case info.name != name:
			t.Errorf("type %d is registered as %q, pinned as %q: a number never changes meaning", p.number, info.name, name)
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(commands)) {
		info := commands[typ]
		p, ok := pinnedTypes[info.name]
		switch {
		case !ok:
			t.Errorf("registered command %s (type %d) is not in pinnedTypes: add it there, with its number written out", info.name, typ)
			continue
		case p.number != typ:
			t.Errorf("%s is registered as type %d, pinned as %d: never renumber a type", info.name, typ, p.number)
		case p.maxVersion != info.maxVersion:
			t.Errorf("%s decodes body versions up to %d, pinned %d: a new version is added to the table with its golden; a version is never dropped", info.name, info.maxVersion, p.maxVersion)
		}
		c := info.new()
		if c.Type() != typ {
			t.Errorf("%s is registered as type %d but %T.Type() is %d", info.name, typ, c, c.Type())
		}
		if c.Version() != info.maxVersion {
			t.Errorf("%s: %T encodes version %d, the registry decodes up to %d", info.name, c, c.Version(), info.maxVersion)
		}
	}
}
