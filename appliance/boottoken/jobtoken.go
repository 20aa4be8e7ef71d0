package boottoken

import (
	"crypto/subtle"
	"encoding/base64"
	"regexp"
	"strings"
)

// Job tokens: the credential of a deploy or release job (issue 18), which
// the deploy agent sends as X-Rollcall-Job and cloud-init's phone_home puts
// in its URL. A token is "rcj1.<job ID>.<HMAC>", the HMAC a master-key
// derived SHA-256 over the rest, so any node renders it into a boot
// script, and checks it, without storing it or a Raft entry. It carries
// no expiry: the job's record decides how long it is good (while the job
// is queued or running; for phone-home, until the machine is released).

const (
	// JobPrefix starts every job token.
	JobPrefix  = "rcj1."
	jobPurpose = "job-token/v1"
)

var jobIDPattern = regexp.MustCompile(`^j-[0-9a-f]{16}$`)

// MintJob makes the token of job id.
func MintJob(key Key, id string) (string, error) {
	if !jobIDPattern.MatchString(id) {
		return "", ErrInvalid
	}
	body := JobPrefix + id
	sum, err := key.Sum(jobPurpose, []byte(body))
	if err != nil {
		return "", err
	}
	return body + "." + base64.RawURLEncoding.EncodeToString(sum), nil
}

// ParseJob checks a job token and returns its job ID; a token this
// cluster did not make is ErrInvalid.
func ParseJob(key Key, tok string) (string, error) {
	if len(tok) > maxLen || !strings.HasPrefix(tok, JobPrefix) {
		return "", ErrInvalid
	}
	dot := strings.LastIndexByte(tok, '.')
	body, sig := tok[:dot], tok[dot+1:]
	id := strings.TrimPrefix(body, JobPrefix)
	if !jobIDPattern.MatchString(id) {
		return "", ErrInvalid
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", ErrInvalid
	}
	want, err := key.Sum(jobPurpose, []byte(body))
	if err != nil || subtle.ConstantTimeCompare(got, want) != 1 {
		return "", ErrInvalid
	}
	return id, nil
}
