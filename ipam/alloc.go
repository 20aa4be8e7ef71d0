package ipam

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rollcall/rollcall/store"
)

// span is a stretch of addresses auto allocation walks, in order.
type span struct {
	key         string
	first, last netip.Addr
}

func spanKey(p netip.Prefix, first netip.Addr) string { return hintPrefix(p) + first.String() }

// hintPrefix names every span of a subnet: when its ranges change, its
// spans change, and the hints are dropped and rebuilt by the next claims.
func hintPrefix(p netip.Prefix) string { return p.String() + "/" }

// autoSpans are where auto allocation looks in a subnet: its static ranges
// from the first; with none, every host address outside the dynamic and
// reserved ranges.
func autoSpans(tx *store.Tx, s store.Subnet) ([]span, error) {
	ranges, err := tx.Ranges(s.CIDR)
	if err != nil {
		return nil, err
	}
	var spans []span
	for _, r := range ranges {
		if r.Kind == store.RangeStatic {
			spans = append(spans, span{spanKey(s.CIDR, r.First), r.First, r.Last})
		}
	}
	if len(spans) > 0 {
		return spans, nil
	}
	// The gaps between dynamic/reserved ranges, each its own span so a hint
	// never points into a range.
	cur := firstHost(s.CIDR)
	end := lastHost(s.CIDR)
	for _, r := range ranges { // sorted by first address
		if cur.Less(r.First) {
			spans = append(spans, span{spanKey(s.CIDR, cur), cur, r.First.Prev()})
		}
		if !r.Last.Less(cur) {
			cur = r.Last.Next()
		}
	}
	if cur.IsValid() && !end.Less(cur) {
		spans = append(spans, span{spanKey(s.CIDR, cur), cur, end})
	}
	return spans, nil
}

// ErrFull is returned when a subnet has no free address left for auto
// allocation.
var ErrFull = errors.New("no free address")

// Pick returns the address auto allocation hands out next in a subnet: the
// first free one of its spans, skipping the gateway. The proposer calls it on
// its local copy; the claim is then checked again in the state machine.
func Pick(tx *store.Tx, p netip.Prefix) (netip.Addr, error) { return PickSkipping(tx, p, nil) }

// PickSkipping is Pick passing over the free addresses skip refuses: a
// proposer with claims in flight skips the addresses it already proposed
// (its local copy does not show them used yet), so that concurrent requests
// on one node do not all pick the same address. A nil skip is Pick.
func PickSkipping(tx *store.Tx, p netip.Prefix, skip func(netip.Addr) bool) (netip.Addr, error) {
	s, err := tx.Subnet(p)
	if err != nil {
		return netip.Addr{}, err
	}
	spans, err := autoSpans(tx, s)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, sp := range spans {
		start := sp.first
		if h, ok := hintOf(tx, sp); ok {
			start = h
		} else if h.IsValid() && sp.last.Less(h) {
			continue // the hint is past the end: the span is full
		}
		for start.IsValid() && !sp.last.Less(start) {
			a, ok := nextUsable(tx, s, start, sp.last)
			if !ok {
				break
			}
			if skip != nil && skip(a) {
				start = a.Next()
				continue
			}
			return a, nil
		}
	}
	return netip.Addr{}, store.Errorf(store.ErrConflict, "subnet %s: %w for auto allocation (static ranges or host addresses outside dynamic/reserved are all used)", p, ErrFull)
}

// nextUsable is the first address of [from, to] that is free and is neither
// the gateway nor a DNS server of s (those are never handed out).
func nextUsable(tx *store.Tx, s store.Subnet, from, to netip.Addr) (netip.Addr, bool) {
	for from.IsValid() && !to.Less(from) {
		a, ok := tx.NextFree(from, to)
		if !ok {
			return netip.Addr{}, false
		}
		if a == s.Gateway || slices.Contains(s.DNS, a) {
			from = a.Next()
			continue
		}
		return a, true
	}
	return netip.Addr{}, false
}

func hintOf(tx *store.Tx, sp span) (netip.Addr, bool) {
	h, ok := tx.AllocHint(sp.key)
	if !ok {
		return h, false
	}
	if sp.first.Is4() {
		h = h.Unmap()
	}
	if h.Less(sp.first) || sp.last.Less(h) {
		return h, false
	}
	return h, true
}

// SubnetOf finds the subnet that holds a.
func SubnetOf(tx *store.Tx, a netip.Addr) (store.Subnet, error) {
	subnets, err := tx.Subnets()
	if err != nil {
		return store.Subnet{}, err
	}
	for _, s := range subnets {
		if s.CIDR.Contains(a) {
			return s, nil
		}
	}
	return store.Subnet{}, store.Errorf(store.ErrNotFound, "address %s is in no known subnet", a)
}

// Claim records an address after checking, against the state it is applied
// to, that it is free and allowed for its kind: auto, static and pinned
// addresses never come from a dynamic or reserved range, reserved ones never
// from a dynamic range, and DHCP ones only from a dynamic range.
func Claim(tx *store.Tx, a store.Address) error {
	a, s, err := checkClaim(tx, a, false)
	if err != nil {
		return err
	}
	if err := tx.PutAddress(a); err != nil {
		return err
	}
	return advanceHint(tx, s, a.IP)
}

// CheckClaim runs every check of Claim without writing: a plan (an
// interface layout's addresses) is checked when it is made, on a read-only
// transaction, and claimed later, when Claim checks it again against the
// state it is applied to.
func CheckClaim(tx *store.Tx, a store.Address) error {
	_, _, err := checkClaim(tx, a, false)
	return err
}

// CheckReclaim is CheckClaim for an address that a.Machine holds already
// and is to hold as another kind or on another interface (an auto address
// an operator pins): every check but "in use", which the caller answers
// by releasing the machine's record before it claims the address again.
// An address held by anyone else fails as in CheckClaim.
func CheckReclaim(tx *store.Tx, a store.Address) error {
	_, _, err := checkClaim(tx, a, true)
	return err
}

// ClaimAll claims every address or none: each is checked (and none may be
// named twice) before the first is written, because a state machine
// command must check everything before it writes.
func ClaimAll(tx *store.Tx, as []store.Address) error {
	seen := map[netip.Addr]bool{}
	for _, a := range as {
		if seen[a.IP.Unmap()] {
			return invalid("address %s is claimed twice", a.IP.Unmap())
		}
		seen[a.IP.Unmap()] = true
		if err := CheckClaim(tx, a); err != nil {
			return err
		}
	}
	for _, a := range as {
		if err := Claim(tx, a); err != nil {
			return err
		}
	}
	return nil
}

// checkClaim is Claim's checks; it returns the address as it is recorded
// (unmapped, with its subnet) and that subnet.
func checkClaim(tx *store.Tx, a store.Address, own bool) (store.Address, store.Subnet, error) {
	a.IP = a.IP.Unmap()
	s, err := SubnetOf(tx, a.IP)
	if err != nil {
		return a, s, err
	}
	if a.Subnet.IsValid() && a.Subnet != s.CIDR {
		return a, s, invalid("address %s is in subnet %s, not %s", a.IP, s.CIDR, a.Subnet)
	}
	a.Subnet = s.CIDR
	if !hostIn(s.CIDR, a.IP) {
		return a, s, invalid("%s is not a host address of %s", a.IP, s.CIDR)
	}
	switch a.How {
	case store.HowAuto, store.HowStatic, store.HowPinned, store.HowReserved, store.HowDHCP, store.HowAdopted, store.HowStateless:
	default:
		return a, s, invalid("address kind %q is not one of auto, static, pinned, reserved, dhcp, stateless", a.How)
	}
	if err := CheckIface(a.Interface); err != nil {
		return a, s, err
	}
	if len(a.Name) > 253 || strings.IndexFunc(a.Name, unicode.IsControl) >= 0 || !utf8.ValidString(a.Name) {
		return a, s, invalid("address name %q is not a host name (at most 253 printable bytes)", store.Clip(a.Name))
	}
	if a.How == store.HowReserved && a.Name == "" {
		return a, s, invalid("a reserved address needs a name")
	}
	if a.How != store.HowReserved && a.How != store.HowAdopted && a.Machine == "" {
		return a, s, invalid("a %s address needs a machine", a.How)
	}
	if a.Machine != "" {
		if _, err := tx.Machine(a.Machine); err != nil {
			return a, s, err
		}
	}
	if a.How != store.HowAdopted && a.IP == s.Gateway && a.How != store.HowReserved {
		return a, s, conflict("%s is the gateway of %s", a.IP, s.CIDR)
	}
	ranges, err := tx.Ranges(s.CIDR)
	if err != nil {
		return a, s, err
	}
	var in *store.Range
	for i := range ranges {
		if ranges[i].Contains(a.IP) {
			in = &ranges[i]
		}
	}
	switch a.How {
	case store.HowAuto, store.HowStatic, store.HowPinned, store.HowStateless:
		if in != nil && in.Kind != store.RangeStatic {
			return a, s, conflict("%s is inside %s range %s–%s", a.IP, in.Kind, in.First, in.Last)
		}
	case store.HowReserved:
		if in != nil && in.Kind == store.RangeDynamic {
			return a, s, conflict("reservation %s is inside dynamic range %s–%s", a.IP, in.First, in.Last)
		}
	case store.HowDHCP:
		if in == nil || in.Kind != store.RangeDynamic {
			return a, s, invalid("DHCP lease %s is outside every dynamic range of %s", a.IP, s.CIDR)
		}
	}
	if tx.AddressUsed(a.IP) {
		// The words of store.PutAddress, which refuses it too.
		old, _ := tx.Address(a.IP)
		if own && old.Machine == a.Machine && a.Machine != "" {
			return a, s, nil
		}
		who := old.Machine
		if who == "" {
			who = old.Name
		}
		return a, s, conflict("address %s is already in use (%s %s)", a.IP, old.How, who)
	}
	return a, s, nil
}

// advanceHint keeps "every address of the span below the hint is used (or
// the gateway)" true after a was taken.
func advanceHint(tx *store.Tx, s store.Subnet, a netip.Addr) error {
	sp, ok, err := spanOf(tx, s, a)
	if err != nil || !ok {
		return err
	}
	h, have := hintOf(tx, sp)
	if have && h != a {
		return nil // a was above the hint: the used run below it is unchanged
	}
	// Either a was the hint, or there is none yet (new span, or ranges
	// changed): walk once to the first free address.
	from := a
	if !have {
		from = sp.first
	}
	next, free := nextUsable(tx, s, from, sp.last)
	if !free {
		next = sp.last.Next()
	}
	return tx.SetAllocHint(sp.key, next)
}

func spanOf(tx *store.Tx, s store.Subnet, a netip.Addr) (span, bool, error) {
	spans, err := autoSpans(tx, s)
	if err != nil {
		return span{}, false, err
	}
	for _, sp := range spans {
		if !a.Less(sp.first) && !sp.last.Less(a) {
			return sp, true, nil
		}
	}
	return span{}, false, nil
}

// Release frees an address and lowers its span's hint if needed.
func Release(tx *store.Tx, a netip.Addr) error {
	a = a.Unmap()
	rec, err := tx.Address(a)
	if err != nil {
		return err
	}
	if err := tx.DeleteAddress(a); err != nil {
		return err
	}
	s, err := tx.Subnet(rec.Subnet)
	if err != nil {
		return nil // subnet gone: nothing to keep in order
	}
	sp, ok, err := spanOf(tx, s, a)
	if err != nil || !ok {
		return err
	}
	// A hint past the span's end (span full) is lowered too: Pick skips a
	// span whose hint is past its end.
	if h, _ := hintOf(tx, sp); h.IsValid() && a.Less(h) {
		return tx.SetAllocHint(sp.key, a)
	}
	return nil
}

// Adopt records, as adopted, the addresses machines already reported inside
// a newly defined subnet. It skips addresses already recorded.
func Adopt(tx *store.Tx, p netip.Prefix) (int, error) {
	ms, err := tx.Machines(store.MachineFilter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range ms {
		for _, raw := range m.IPs {
			a, err := netip.ParseAddr(raw)
			if err != nil || !p.Contains(a.Unmap()) || tx.AddressUsed(a.Unmap()) {
				continue
			}
			if err := tx.PutAddress(store.Address{IP: a.Unmap(), Subnet: p, How: store.HowAdopted, Machine: m.ID, Created: m.UpdatedAt}); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// ParseVID reads a VID argument.
func ParseVID(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 4094 {
		return 0, invalid("VID %q is not a number in 0–4094", s)
	}
	return v, nil
}
