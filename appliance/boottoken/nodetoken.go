package boottoken

import (
	"crypto/subtle"
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
)

// Node tokens: the credential of a stateless node (issue 20), which its
// boot script puts on the kernel command line (rollcall.node=) and the
// node's rollcall-overlay sends as X-Rollcall-Node. A token is
// "rcn1.<machine ID>.<generation>.<HMAC>", the HMAC a master-key derived
// SHA-256 over the rest, so any node renders and checks it without storing
// it or a Raft entry. The generation is the Raft index of the machine's
// assign: the token is good only while the machine's node record has that
// generation, so an unassign (or a new assign) ends it.

const (
	// NodePrefix starts every node token.
	NodePrefix  = "rcn1."
	nodePurpose = "node-token/v1"
)

var nodeMachinePattern = regexp.MustCompile(`^m-[0-9a-f]{12}$`)

// MintNode makes the token of machine's assignment at generation.
func MintNode(key Key, machine string, generation uint64) (string, error) {
	if !nodeMachinePattern.MatchString(machine) || generation == 0 {
		return "", ErrInvalid
	}
	body := NodePrefix + machine + "." + strconv.FormatUint(generation, 10)
	sum, err := key.Sum(nodePurpose, []byte(body))
	if err != nil {
		return "", err
	}
	return body + "." + base64.RawURLEncoding.EncodeToString(sum), nil
}

// ParseNode checks a node token and returns its machine and generation;
// a token this cluster did not make is ErrInvalid. Whether the generation
// is still the machine's is the caller's to check against the store.
func ParseNode(key Key, tok string) (string, uint64, error) {
	if len(tok) > maxLen || !strings.HasPrefix(tok, NodePrefix) {
		return "", 0, ErrInvalid
	}
	parts := strings.Split(strings.TrimPrefix(tok, NodePrefix), ".")
	if len(parts) != 3 || !nodeMachinePattern.MatchString(parts[0]) {
		return "", 0, ErrInvalid
	}
	gen, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || gen == 0 || strconv.FormatUint(gen, 10) != parts[1] {
		return "", 0, ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", 0, ErrInvalid
	}
	want, err := key.Sum(nodePurpose, []byte(NodePrefix+parts[0]+"."+parts[1]))
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return "", 0, ErrInvalid
	}
	return parts[0], gen, nil
}
