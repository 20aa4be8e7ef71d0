package raftfsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rollcall/rollcall/store"
)

// Type is a command's stable type byte. Never renumber one: old log entries
// and snapshots keep their numbers forever. The high bit marks a command a
// node may skip when it does not know it (a newer leader during a rolling
// upgrade); everything else must be understood or the node stops.
type Type uint8

// FlagIgnorable is set in a Type whose command may be skipped by a node that
// does not know it.
const FlagIgnorable Type = 0x80

// Command types. Families live in commands_*.go.
const (
	TypeNoop  Type = 0
	TypeBatch Type = 1

	TypeClusterInit Type = 10
	TypeNodePut     Type = 11
	TypeNodeRemove  Type = 12
	TypeJoinCodeAdd Type = 13
	TypeJoinCodeUse Type = 14

	TypeMachineCreate Type = 20
	TypeMachineDelete Type = 21
	TypeMachineEvent  Type = 22
	TypeMachineEnlist Type = 23
	TypeCommission    Type = 24
	TypeRecommission  Type = 25

	TypeFabricPut      Type = 40
	TypeFabricDelete   Type = 41
	TypeVLANPut        Type = 42
	TypeVLANDelete     Type = 43
	TypeSubnetPut      Type = 44
	TypeSubnetDelete   Type = 45
	TypeRangePut       Type = 46
	TypeRangeDelete    Type = 47
	TypeAddressClaim   Type = 48
	TypeAddressRelease Type = 49

	TypeLeaseBlockClaim   Type = 60
	TypeLeaseBlockRenew   Type = 61
	TypeLeaseBlockRelease Type = 62
	TypeLeaseBatch        Type = 63
	TypeLeaseExpire       Type = 64

	TypeImagePut    Type = 80
	TypeImageDelete Type = 81
	TypeImageHave   Type = 82

	TypeJobEnqueue Type = 90
	TypeJobStart   Type = 91
	TypeJobFinish  Type = 92
	TypeBMCSet     Type = 93
	TypeBMCClear   Type = 94

	TypeLayoutPut     Type = 110
	TypeLayoutDelete  Type = 111
	TypeTagPut        Type = 100
	TypeTagDelete     Type = 101
	TypeMachineTags   Type = 102
	TypeAutoTagsSet   Type = 103
	TypeLocationSet   Type = 104
	TypeRackPut       Type = 105
	TypeRackDelete    Type = 106
	TypeMachineNetSet Type = 107
	TypeMachineRename Type = 108

	TypeOSVersionAdd    Type = 120
	TypeOSPromote       Type = 121
	TypeOSVersionRemove Type = 122
	TypeOSImageSet      Type = 123
	TypeOSHave          Type = 124
	TypeOSImageDelete   Type = 125
	TypeOSPrune         Type = 126
	TypeOSSyncStart     Type = 127
	TypeOSSyncEnd       Type = 128
	TypeDeployStart     Type = 130
	TypeReleaseStart    Type = 131
	TypeJobReport       Type = 132
	TypeJobCancel       Type = 133
	TypeJobTimeout      Type = 134
	TypePhoneHome       Type = 135

	TypeProfilePut     Type = 140
	TypeProfileDelete  Type = 141
	TypeAssign         Type = 142
	TypeUnassign       Type = 143
	TypeOverlayPut     Type = 144
	TypeOverlayDelete  Type = 145
	TypeStatelessSeen  Type = 146
	TypeMungeKeySet    Type = 147
	TypeClusterVarsSet Type = 148
)

// Command is a replicated change. apply runs inside the state machine's
// transaction: it must be deterministic (no clock, randomness, network or
// goroutines; the proposer stamps those into the command) and must check
// everything before it writes, because a business error does not roll back
// the other commands of its batch.
type Command interface {
	Type() Type
	Version() uint8
	apply(tx *store.Tx) error
}

// Entry header: type byte, body version byte, then the JSON body.
const headerLen = 2

type commandInfo struct {
	name       string
	maxVersion uint8
	new        func() Command
}

var commands = map[Type]commandInfo{}

func register(families ...map[Type]commandInfo) {
	for _, f := range families {
		for t, c := range f {
			if _, dup := commands[t]; dup {
				panic(fmt.Sprintf("raftfsm: command type %d registered twice", t))
			}
			commands[t] = c
		}
	}
}

func init() {
	register(coreCommands(), clusterCommands(), machineCommands(), networkCommands(), leaseCommands(), imageCommands(), powerCommands(),
		tagCommands(), locationCommands(), layoutCommands(), netCommands(), osCommands(), deployCommands(), statelessCommands(), versionCommands(), certCommands())
	knownDefault = KnownVersions()
}

// bodyCodec is implemented by commands whose body is not plain JSON (large
// payloads carried as raw bytes). unmarshalBody gets every version, so old
// JSON bodies stay readable.
type bodyCodec interface {
	marshalBody() ([]byte, error)
	unmarshalBody(version uint8, b []byte) error
}

// Encode turns a command into the bytes of a log entry.
func Encode(c Command) ([]byte, error) {
	var body []byte
	var err error
	if bc, ok := c.(bodyCodec); ok {
		body, err = bc.marshalBody()
	} else {
		body, err = json.Marshal(c)
	}
	if err != nil {
		return nil, fmt.Errorf("encode command %d: %w", c.Type(), err)
	}
	out := make([]byte, headerLen, headerLen+len(body))
	out[0], out[1] = byte(c.Type()), c.Version()
	return append(out, body...), nil
}

// decodeStrict decodes a JSON body, refusing fields the command does not
// know: a body from a newer writer that this node would otherwise read
// with a field silently dropped stops it instead (versions say what is
// optional, not the decoder).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the body")
	}
	return nil
}

// errUnknownIgnorable marks an entry a node skips on purpose.
var errUnknownIgnorable = errors.New("unknown ignorable command")

// Decode parses a log entry. It is used both on the proposer, to refuse a
// bad command before it enters the log, and in Apply.
func Decode(b []byte) (Command, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("decode command: entry of %d bytes is shorter than its header", len(b))
	}
	t, v := Type(b[0]), b[1]
	info, ok := commands[t]
	if !ok {
		if t&FlagIgnorable != 0 {
			return nil, errUnknownIgnorable
		}
		return nil, fmt.Errorf("decode command: unknown type %d: this node is older than the leader", t)
	}
	if v == 0 || v > info.maxVersion {
		return nil, fmt.Errorf("decode command %s: body version %d not understood (up to %d)", info.name, v, info.maxVersion)
	}
	c := info.new()
	var err error
	if bc, ok := c.(bodyCodec); ok {
		err = bc.unmarshalBody(v, b[headerLen:])
	} else {
		err = decodeStrict(b[headerLen:], c)
	}
	if err != nil {
		return nil, fmt.Errorf("decode command %s: %w", info.name, err)
	}
	return c, nil
}

// Noop changes nothing; it is a cheap way to commit an index (tests, barriers).
type Noop struct{}

func (Noop) Type() Type                { return TypeNoop }
func (Noop) Version() uint8            { return 1 }
func (Noop) apply(*store.Tx) error     { return nil }
func (b *Batch) Type() Type            { return TypeBatch }
func (b *Batch) Version() uint8        { return 1 }
func (b *Batch) apply(*store.Tx) error { return errors.New("batch applied as a single command") }

// Batch carries several commands that arrived together in one log entry (a
// burst of lease grants, events from one inventory), so they share one Raft
// round and one fsync. Each keeps its own result.
type Batch struct {
	Entries [][]byte `json:"entries"`
}

// NewBatch encodes cmds into one Batch.
func NewBatch(cmds ...Command) (*Batch, error) {
	b := &Batch{Entries: make([][]byte, 0, len(cmds))}
	for _, c := range cmds {
		if _, nested := c.(*Batch); nested {
			return nil, errors.New("encode batch: batches do not nest")
		}
		e, err := Encode(c)
		if err != nil {
			return nil, err
		}
		b.Entries = append(b.Entries, e)
	}
	return b, nil
}

func coreCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeNoop:  {"noop", 1, func() Command { return &Noop{} }},
		TypeBatch: {"batch", 1, func() Command { return &Batch{} }},

		TypeStateCheck: {"state-check", 1, func() Command { return &StateCheck{} }},
	}
}
