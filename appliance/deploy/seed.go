package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/store"
)

// MergeType is every part's merge rule: cloud-init's default replaces
// lists, so a tag's packages would drop the deployment's; this appends
// lists, merges dictionaries without replacing keys and keeps strings.
const MergeType = "list(append)+dict(no_replace,recurse_list)+str()"

// maxOperatorParts bounds the parts of an operator's MIME document.
const maxOperatorParts = 64

// Seed is what a deployment's user-data is made of.
type Seed struct {
	JobID    string
	Hostname string
	FQDN     string
	// PhoneHome is the URL cloud-init's phone_home posts to
	// (<server>/api/v1/phone-home/<token>).
	PhoneHome string
	// CAPEM is the cluster's CA certificate: cloud-init's ca_certs adds it
	// to the system's trust store before phone_home posts to the
	// appliance's HTTPS (the agent's copy in the anchor directories is
	// only read once update-ca-certificates or update-ca-trust runs).
	CAPEM    string
	UserData store.JobUserData
	// Tags are the fragments of the machine's tags, in the order they are
	// appended (TagFragments).
	Tags []Fragment
}

// Fragment is a tag's cloud_config: a #cloud-config document or a #!
// script.
type Fragment struct {
	Tag  string
	Text string
}

// TagFragments lists the fragments of a machine's tags: its manual tags,
// then its auto tags, each sorted by name, each tag once; tags without a
// fragment (or no longer defined) are left out.
func TagFragments(m store.Machine, tags map[string]store.Tag) []Fragment {
	var out []Fragment
	seen := map[string]bool{}
	for _, list := range [][]string{m.Tags, m.AutoTags} {
		names := slices.Clone(list)
		slices.Sort(names)
		for _, n := range names {
			if seen[n] {
				continue
			}
			seen[n] = true
			if t, ok := tags[n]; ok && t.CloudConfig != "" {
				out = append(out, Fragment{Tag: n, Text: t.CloudConfig})
			}
		}
	}
	return out
}

// MetaData is the NoCloud meta-data: the job is the instance (a redeploy
// is a new instance, so cloud-init runs its first-boot modules again).
func MetaData(jobID, hostname string) string {
	return "instance-id: " + yamlString(jobID) + "\nlocal-hostname: " + yamlString(hostname) + "\n"
}

// part is one MIME part of the user-data.
type part struct {
	contentType, filename, body string
}

// UserData renders the deployment's user-data: a MIME multipart whose
// first part is Rollcall's #cloud-config (hostname, FQDN, SSH keys for
// root and the default user, package upgrade, packages, phone_home), then
// each tag fragment, then the operator's own part (or the parts of the
// operator's MIME document). Every part carries MergeType.
func UserData(s Seed) (string, error) {
	parts := []part{{"text/cloud-config", "rollcall.cfg", cloudConfig(s)}}
	for _, f := range s.Tags {
		p, err := textPart(f.Text, "tag-"+f.Tag)
		if err != nil {
			return "", fmt.Errorf("tag %s: %w", f.Tag, err)
		}
		parts = append(parts, p)
	}
	if op := s.UserData.Operator; op != "" {
		ps, err := operatorParts(op)
		if err != nil {
			return "", err
		}
		parts = append(parts, ps...)
	}
	boundary := "==rollcall-" + s.JobID + "=="
	for n := 1; containsBoundary(parts, boundary); n++ {
		boundary = fmt.Sprintf("==rollcall-%s-%d==", s.JobID, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\nMIME-Version: 1.0\n\n", boundary)
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\nContent-Type: %s; charset=\"utf-8\"\nMIME-Version: 1.0\nContent-Disposition: attachment; filename=\"%s\"\nMerge-Type: %s\n\n", boundary, p.contentType, p.filename, MergeType)
		b.WriteString(p.body)
		if !strings.HasSuffix(p.body, "\n") {
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "--%s--\n", boundary)
	return b.String(), nil
}

func containsBoundary(parts []part, boundary string) bool {
	for _, p := range parts {
		if strings.Contains(p.body, boundary) {
			return true
		}
	}
	return false
}

// ErrUserDataKind is an operator part or fragment of a kind the seed does
// not carry.
var ErrUserDataKind = errors.New("user-data must start with #cloud-config (a document merged into the deployment's) or #! (a script), or be a MIME multipart document (Content-Type: multipart/…)")

// textPart makes a part of a #cloud-config document or a #! script.
func textPart(text, name string) (part, error) {
	switch {
	case strings.HasPrefix(text, "#cloud-config"):
		return part{"text/cloud-config", name + ".cfg", text}, nil
	case strings.HasPrefix(text, "#!"):
		return part{"text/x-shellscript", name + ".sh", text}, nil
	}
	return part{}, ErrUserDataKind
}

// operatorParts reads the operator's -user-data: one #cloud-config or #!
// part, or the parts of a MIME multipart document (each re-emitted with
// the merge type, so a list in it appends to the deployment's).
func operatorParts(op string) ([]part, error) {
	if p, err := textPart(op, "operator"); err == nil {
		return []part{p}, nil
	}
	tp := textproto.NewReader(bufio.NewReader(strings.NewReader(op)))
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, ErrUserDataKind
	}
	mt, params, err := mime.ParseMediaType(hdr.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mt, "multipart/") || params["boundary"] == "" {
		return nil, ErrUserDataKind
	}
	mr := multipart.NewReader(tp.R, params["boundary"])
	var out []part
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the operator's MIME document: %w", err)
		}
		if len(out) == maxOperatorParts {
			return nil, fmt.Errorf("the operator's MIME document has more than %d parts", maxOperatorParts)
		}
		body, err := io.ReadAll(io.LimitReader(p, store.MaxOperatorPart+1))
		if err != nil {
			return nil, fmt.Errorf("the operator's MIME document: %w", err)
		}
		name := fmt.Sprintf("operator-%d", len(out)+1)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch {
		case ct == "text/cloud-config" || ct == "text/x-shellscript":
			ext := ".cfg"
			if ct == "text/x-shellscript" {
				ext = ".sh"
			}
			out = append(out, part{ct, name + ext, string(body)})
		default:
			tpart, err := textPart(string(body), name)
			if err != nil {
				return nil, fmt.Errorf("part %d of the operator's MIME document (%s): %w", len(out)+1, store.Clip(ct), ErrUserDataKind)
			}
			out = append(out, tpart)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the operator's MIME document has no part")
	}
	return out, nil
}

// CheckOperator tells whether the operator's user-data is one the seed
// carries; the API runs it before it makes the job.
func CheckOperator(op string) error {
	if op == "" {
		return nil
	}
	_, err := operatorParts(op)
	return err
}

// cloudConfig is Rollcall's own part.
func cloudConfig(s Seed) string {
	var b bytes.Buffer
	b.WriteString("#cloud-config\n# written by rollcall for job " + s.JobID + "\n")
	fmt.Fprintf(&b, "hostname: %s\n", yamlString(s.Hostname))
	if s.FQDN != "" {
		fmt.Fprintf(&b, "fqdn: %s\n", yamlString(s.FQDN))
	}
	b.WriteString("manage_etc_hosts: true\n")
	if keys := s.UserData.SSHKeys; len(keys) > 0 {
		// Top-level keys go to the default user; with disable_root false
		// cloud-init gives root the same keys, unprefixed.
		b.WriteString("disable_root: false\nssh_authorized_keys:\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "  - %s\n", yamlString(k))
		}
	}
	fmt.Fprintf(&b, "package_update: %t\npackage_upgrade: %t\n", s.UserData.Upgrade || len(s.UserData.Packages) > 0, s.UserData.Upgrade)
	if len(s.UserData.Packages) > 0 {
		b.WriteString("packages:\n")
		for _, p := range s.UserData.Packages {
			fmt.Fprintf(&b, "  - %s\n", yamlString(p))
		}
	}
	if pem := strings.TrimSpace(s.CAPEM); pem != "" {
		b.WriteString("ca_certs:\n  trusted:\n    - |\n")
		for _, line := range strings.Split(pem, "\n") {
			fmt.Fprintf(&b, "      %s\n", strings.TrimRight(line, "\r"))
		}
	}
	if s.PhoneHome != "" {
		fmt.Fprintf(&b, "phone_home:\n  url: %s\n  post: all\n  tries: 10\n", yamlString(s.PhoneHome))
	}
	return b.String()
}

// yamlString quotes s as a YAML double-quoted scalar: JSON's string
// escapes are YAML's, so any text stays one scalar.
func yamlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
