package store

import (
	"encoding/json"
	"fmt"

	"github.com/rollcall/rollcall/store/binenc"
)

// Records written at DHCP rates (leases, lease blocks, sightings) and the
// change-log entry every write adds are stored in binenc, not JSON: a
// format byte, then the fields in order. A value starting with '{' is the
// JSON of an earlier store and still reads. A new field goes at the end
// under a new format byte; decoders keep reading the old ones.
const (
	formatJSON  = '{'
	formatBinV1 = 1
)

func encodeLease(l Lease) []byte {
	w := binenc.NewWriter(96)
	w.Byte(formatBinV1)
	w.Addr(l.IP)
	w.Prefix(l.Subnet)
	w.String(l.MAC)
	w.String(l.ClientID)
	w.String(l.Hostname)
	w.String(l.Node)
	w.Time(l.Granted)
	w.Time(l.Expires)
	w.Bool(l.Declined)
	w.Uvarint(l.Index)
	return w.Bytes()
}

func decodeLease(v []byte, l *Lease) error {
	return decodeRecord(v, l, func(r *binenc.Reader) {
		*l = Lease{
			IP: r.Addr(), Subnet: r.Prefix(), MAC: r.String(), ClientID: r.String(), Hostname: r.String(),
			Node: r.String(), Granted: r.Time(), Expires: r.Time(), Declined: r.Bool(), Index: r.Uvarint(),
		}
	})
}

func encodeLeaseBlock(b LeaseBlock) []byte {
	w := binenc.NewWriter(64)
	w.Byte(formatBinV1)
	w.Prefix(b.Subnet)
	w.Addr(b.First)
	w.Addr(b.Last)
	w.String(b.Node)
	w.Time(b.Expires)
	w.Time(b.Quarantine)
	w.Uvarint(b.Index)
	return w.Bytes()
}

func decodeLeaseBlock(v []byte, b *LeaseBlock) error {
	return decodeRecord(v, b, func(r *binenc.Reader) {
		*b = LeaseBlock{
			Subnet: r.Prefix(), First: r.Addr(), Last: r.Addr(), Node: r.String(),
			Expires: r.Time(), Quarantine: r.Time(), Index: r.Uvarint(),
		}
	})
}

func encodeSeen(s Seen) []byte {
	w := binenc.NewWriter(64)
	w.Byte(formatBinV1)
	appendSeen(w, s)
	return w.Bytes()
}

func decodeSeen(v []byte, s *Seen) error {
	return decodeRecord(v, s, func(r *binenc.Reader) { *s = readSeen(r) })
}

// appendSeen writes a sighting's fields. A lease batch in the Raft log
// carries sightings in a format of its own (raftfsm), equal to this one
// today but free to part from it.
func appendSeen(w *binenc.Writer, s Seen) {
	w.String(s.MAC)
	w.String(s.Node)
	w.String(s.Interface)
	w.String(s.VLAN)
	w.Varint(int64(s.Arch))
	w.String(s.UserClass)
	w.Time(s.Last)
}

// readSeen reads what appendSeen wrote.
func readSeen(r *binenc.Reader) Seen {
	return Seen{
		MAC: r.String(), Node: r.String(), Interface: r.String(), VLAN: r.String(),
		Arch: int(r.Varint()), UserClass: r.String(), Last: r.Time(),
	}
}

func encodeChange(c Change) []byte {
	w := binenc.NewWriter(16 + len(c.Table) + len(c.Key) + len(c.Op))
	w.Byte(formatBinV1)
	w.Uvarint(c.Index)
	w.String(c.Table)
	w.String(c.Key)
	w.String(c.Op)
	return w.Bytes()
}

func decodeChange(v []byte, c *Change) error {
	return decodeRecord(v, c, func(r *binenc.Reader) {
		*c = Change{Index: r.Uvarint(), Table: r.String(), Key: r.String(), Op: r.String()}
	})
}

// decodeRecord dispatches on the format byte: JSON into dst, or binV1
// through fields, which must consume the value exactly.
func decodeRecord(v []byte, dst any, fields func(*binenc.Reader)) error {
	if len(v) == 0 {
		return fmt.Errorf("decode %T: empty record", dst)
	}
	switch v[0] {
	case formatJSON:
		if err := json.Unmarshal(v, dst); err != nil {
			return fmt.Errorf("decode %T: %w", dst, err)
		}
		return nil
	case formatBinV1:
		r := binenc.NewReader(v[1:])
		fields(r)
		if err := r.Done(); err != nil {
			return fmt.Errorf("decode %T: %w", dst, err)
		}
		return nil
	}
	return fmt.Errorf("decode %T: unknown record format %#x", dst, v[0])
}
