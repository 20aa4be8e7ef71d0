// Package tagrule owns tags' match rules: parsing a rule once, checking
// it against what a rule may use, and evaluating it over one machine at a
// time, with bounds that do not depend on the wall clock. It is pure: the
// machine comes in as a Node, and the inventory facts a Node lacks come
// through a function its caller provides (raftfsm's proposer side reads
// them from the store).
//
// A rule is a Go text/template over a Node (see Node for every field)
// that prints true or false, as in the spec's
//
//	{{ gt .Node.GPUs 0 }}
//	{{ and (pciVendor "15b3") (ge .Node.MemoryGiB 512) }}
//	{{ or (eq .Node.Rack "R12") (has .Node.Tags "burn-in") }}
//
// A rule may use the template actions if, else, with, range (over a list
// of the Node), break, continue, variables and comments; the built-in
// functions and, or, not, eq, ne, lt, le, gt, ge, len and index; and
// these (Funcs lists them):
//
//	has LIST VALUE          VALUE is an element of LIST (.Node.Tags, .Node.GPUModels, …)
//	contains S SUB          SUB is within S
//	hasPrefix S PREFIX      S starts with PREFIX
//	hasSuffix S SUFFIX      S ends with SUFFIX
//	lower S                 S in lower case
//	pciVendor "10de"        a PCI function has vendor id 10de (NVIDIA)
//	pciDevice "10de:20b2"   a PCI function is vendor 10de, device 20b2
//
// Nothing else: no template definitions or calls, no printf (which could
// build a string of any size), no call. A rule that uses anything else,
// or that does not parse, is refused by Parse with its line and column.
//
// Why an evaluation is bounded: a template cannot loop except with range
// (text/template has no recursion without template calls, which are
// refused), and every turn of a range costs a step, as does every element
// has and pciVendor look at; an evaluation that would take more than
// MaxSteps stops with an error. The work between two steps is bounded by
// the rule's size (MaxRule), so the whole evaluation is bounded by
// MaxRule × MaxSteps operations, and its output by MaxOutput bytes. The
// Node's lists are bounded too (the inventory limits of store/inventory),
// but the budget does not rely on it: a range over an integer (Go 1.24's
// range 1000000000) stops at the budget like any other.
//
// A rule sees the machine as its last inventory and its record describe
// it: hardware, location, and the tags an operator gave it (never the
// tags rules gave it, so no rule depends on another's outcome).
package tagrule
