// Package nocloud reads a NoCloud seed (meta-data and user-data, as the
// deploy agent writes them into /var/lib/cloud/seed/nocloud) the way
// cloud-init 22.4 reads it, for the parts the deploy test image's tiny init
// acts on: the instance id, the hostname and FQDN (cc_set_hostname's
// rules), and phone_home (cc_phone_home's form). user-data may be a
// cloud-config, gzip-compressed, or a MIME multipart whose cloud-config
// parts are merged in order with each part's Merge-Type (cloud-init's
// default is dict(replace)+list()+str()).
//
// This is not cloud-init: the e2e-full image runs the real one. It reads
// what a booted machine was given, so every input is bounded (size, parts,
// nesting) and a malformed seed is an error, never a panic.
package nocloud

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Bounds on a seed.
const (
	MaxSeedBytes = 1 << 20  // meta-data or user-data as read
	maxExpanded  = 16 << 20 // after gunzip and part decoding, all parts together
	maxParts     = 64
	maxDepth     = 4
)

// MetaData is what meta-data says.
type MetaData struct {
	InstanceID    string // instance-id
	LocalHostname string // local-hostname
}

// ParseMetaData reads meta-data (YAML, or JSON, which is YAML).
func ParseMetaData(b []byte) (MetaData, error) {
	if len(b) > MaxSeedBytes {
		return MetaData{}, fmt.Errorf("meta-data: %d bytes (at most %d)", len(b), MaxSeedBytes)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return MetaData{}, fmt.Errorf("meta-data: %w", err)
	}
	md := MetaData{InstanceID: scalar(m["instance-id"]), LocalHostname: scalar(m["local-hostname"])}
	if md.InstanceID == "" {
		return md, errors.New("meta-data: no instance-id")
	}
	return md, nil
}

// Config is the merged cloud-config of a user-data.
type Config map[string]any

// ParseUserData reads user-data into its merged cloud-config. Parts that
// are not cloud-config (scripts, includes, boothooks) are left out; a
// user-data with none is an empty Config.
func ParseUserData(b []byte) (Config, error) {
	if len(b) > MaxSeedBytes {
		return nil, fmt.Errorf("user-data: %d bytes (at most %d)", len(b), MaxSeedBytes)
	}
	p := &parser{budget: maxExpanded, cfg: Config{}}
	if err := p.part(b, "", "", 0); err != nil {
		return nil, fmt.Errorf("user-data: %w", err)
	}
	return p.cfg, nil
}

type parser struct {
	budget int // bytes of decoded content left
	parts  int
	cfg    Config
}

// part handles one piece of user-data: ctype is its MIME type ("" when it
// came without headers), mergeType its Merge-Type header.
func (p *parser) part(b []byte, ctype, mergeType string, depth int) error {
	if p.parts++; p.parts > maxParts {
		return fmt.Errorf("more than %d parts", maxParts)
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		u, err := io.ReadAll(io.LimitReader(zr, int64(p.budget)+1))
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		if len(u) > p.budget {
			return fmt.Errorf("more than %d bytes once decompressed", maxExpanded)
		}
		b = u
	}
	if p.budget -= len(b); p.budget < 0 {
		return fmt.Errorf("more than %d bytes of parts", maxExpanded)
	}
	switch {
	case ctype == "" && looksMIME(b):
		if depth >= maxDepth {
			return fmt.Errorf("MIME parts nested deeper than %d", maxDepth)
		}
		return p.mime(b, depth+1)
	case ctype == "text/cloud-config", (ctype == "" || ctype == "text/plain" || ctype == "text/x-not-multipart") && bytes.HasPrefix(b, []byte("#cloud-config")):
		return p.merge(b, mergeType)
	default:
		return nil // a script, an include, a boothook: not ours to run
	}
}

// looksMIME tells a MIME message from plain user-data: its first line is a
// header, and cloud-init's own markers (#cloud-config, #!) are not.
func looksMIME(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	name, _, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 || bytes.HasPrefix(line, []byte("#")) {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

func (p *parser) mime(b []byte, depth int) error {
	msg, err := mail.ReadMessage(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		return fmt.Errorf("MIME: %w", err)
	}
	body, err := io.ReadAll(msg.Body)
	if err != nil {
		return fmt.Errorf("MIME: %w", err)
	}
	return p.entity(msg.Header, body, depth)
}

// header is a part's headers: mail.Header or a multipart part's.
type header interface{ Get(string) string }

// entity handles one MIME entity: a multipart is walked, anything else is
// decoded and handed to part.
func (p *parser) entity(h header, body []byte, depth int) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("MIME Content-Type %q: %w", ct, err)
	}
	merge := h.Get("Merge-Type")
	if merge == "" {
		merge = h.Get("X-Merge-Type")
	}
	if !strings.HasPrefix(mt, "multipart/") {
		decoded, err := decode(body, h.Get("Content-Transfer-Encoding"))
		if err != nil {
			return err
		}
		return p.part(decoded, mt, merge, depth)
	}
	if depth > maxDepth {
		return fmt.Errorf("MIME parts nested deeper than %d", maxDepth)
	}
	if params["boundary"] == "" {
		return fmt.Errorf("MIME %s without a boundary", mt)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("MIME: %w", err)
		}
		pb, err := io.ReadAll(part)
		if err != nil {
			return fmt.Errorf("MIME part: %w", err)
		}
		if err := p.entity(part.Header, pb, depth+1); err != nil {
			return err
		}
	}
}

func decode(b []byte, cte string) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "", "7bit", "8bit", "binary":
		return b, nil
	case "base64":
		out, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, &stripSpace{r: bytes.NewReader(b)}))
		if err != nil {
			return nil, fmt.Errorf("MIME part base64: %w", err)
		}
		return out, nil
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(b)))
		if err != nil {
			return nil, fmt.Errorf("MIME part quoted-printable: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("MIME Content-Transfer-Encoding %q (want base64, quoted-printable, 7bit, 8bit or binary)", cte)
	}
}

// stripSpace drops the line breaks and blanks base64 bodies carry.
type stripSpace struct{ r io.ByteReader }

func (s *stripSpace) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c, err := s.r.ReadByte()
		if err != nil {
			return n, err
		}
		if c == '\n' || c == '\r' || c == ' ' || c == '\t' {
			continue
		}
		p[n] = c
		n++
	}
	return n, nil
}

// merge adds one cloud-config document to the config.
func (p *parser) merge(b []byte, mergeType string) error {
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("cloud-config: %w", err)
	}
	how := mergeType
	if v, ok := doc["merge_how"]; ok {
		how = mergeHowString(v)
	} else if v, ok := doc["merge_type"]; ok {
		how = mergeHowString(v)
	}
	m, err := parseMerge(how)
	if err != nil {
		return err
	}
	p.cfg = Config(m.dict(p.cfg, doc))
	return nil
}

// merger is cloud-init's dict and list mergers (cloudinit/mergers), for
// the options a deploy's user-data uses.
type merger struct {
	dictReplace  bool // dict(replace); dict() alone is no_replace
	recurseList  bool // dict(recurse_list|recurse_array)
	listMode     string
	listReplaced bool // list() was named
}

// parseMerge reads a Merge-Type ("list(append)+dict(no_replace,recurse_list)+str()").
// An empty one is cloud-config's default, dict(replace)+list()+str().
func parseMerge(s string) (merger, error) {
	if strings.TrimSpace(s) == "" {
		s = "dict(replace)+list()+str()"
	}
	m := merger{listMode: "replace"}
	for _, term := range strings.Split(s, "+") {
		term = strings.TrimSpace(term)
		name, rest, _ := strings.Cut(term, "(")
		opts := map[string]bool{}
		for _, o := range strings.Split(strings.TrimSuffix(rest, ")"), ",") {
			if o = strings.TrimSpace(o); o != "" {
				opts[o] = true
			}
		}
		switch strings.TrimSpace(name) {
		case "dict":
			m.dictReplace = opts["replace"]
			m.recurseList = opts["recurse_list"] || opts["recurse_array"]
		case "list":
			for _, mode := range []string{"append", "prepend", "no_replace"} {
				if opts[mode] {
					m.listMode = mode
				}
			}
		case "str", "":
		default:
			return m, fmt.Errorf("cloud-config: merge type %q (want dict, list or str)", name)
		}
	}
	return m, nil
}

func mergeHowString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any: // [{name: dict, settings: [replace]}, …]
		var terms []string
		for _, e := range v {
			em, _ := e.(map[string]any)
			var settings []string
			if ss, ok := em["settings"].([]any); ok {
				for _, s := range ss {
					settings = append(settings, scalar(s))
				}
			}
			terms = append(terms, scalar(em["name"])+"("+strings.Join(settings, ",")+")")
		}
		return strings.Join(terms, "+")
	}
	return ""
}

func (m merger) dict(old, new map[string]any) map[string]any {
	out := make(map[string]any, len(old)+len(new))
	for k, v := range old {
		out[k] = v
	}
	for k, nv := range new {
		ov, ok := out[k]
		if !ok || m.dictReplace {
			out[k] = nv
			continue
		}
		switch nv := nv.(type) {
		case map[string]any:
			if om, ok := ov.(map[string]any); ok {
				out[k] = m.dict(om, nv)
			}
		case []any:
			if ol, ok := ov.([]any); ok && m.recurseList {
				out[k] = m.list(ol, nv)
			}
		}
	}
	return out
}

func (m merger) list(old, new []any) []any {
	switch m.listMode {
	case "append":
		return append(append([]any{}, old...), new...)
	case "prepend":
		return append(append([]any{}, new...), old...)
	case "no_replace":
		return old
	}
	return new
}

// Hostname is the hostname and FQDN cc_set_hostname gives the machine
// (cloudinit/util.get_hostname_fqdn): user-data's fqdn, else a hostname
// with a dot in it, else meta-data's local-hostname.
func Hostname(cfg Config, md MetaData) (hostname, fqdn string) {
	mdHost, mdFQDN := md.hostnames()
	if f := scalar(cfg["fqdn"]); f != "" {
		h := scalar(cfg["hostname"])
		if h == "" {
			h, _, _ = strings.Cut(f, ".")
		}
		return h, f
	}
	if h := scalar(cfg["hostname"]); h != "" {
		if i := strings.Index(h, "."); i > 0 {
			return h[:i], h
		}
		return h, mdFQDN
	}
	return mdHost, mdFQDN
}

// hostnames is the datasource's own hostname and FQDN (cloud-init's
// DataSource.get_hostname): local-hostname's first label, and the whole
// of it or that label in "localdomain".
func (md MetaData) hostnames() (string, string) {
	l := md.LocalHostname
	if l == "" {
		return "localhost", "localhost.localdomain"
	}
	if isIPv4(l) {
		l = "ip-" + strings.ReplaceAll(l, ".", "-")
	}
	toks := strings.Split(l, ".")
	if len(toks) > 1 {
		return toks[0], l
	}
	return toks[0], toks[0] + ".localdomain"
}

func isIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// PhoneHome is a cloud-config's phone_home.
type PhoneHome struct {
	URL   string
	Post  []string // the form fields asked for
	Tries int
}

// AllFields is what post: all sends (cc_phone_home's POST_LIST_ALL).
var AllFields = []string{"pub_key_dsa", "pub_key_rsa", "pub_key_ecdsa", "pub_key_ed25519", "instance_id", "hostname", "fqdn"}

// PhoneHomeOf reads phone_home from the config: nil when there is none
// (or no url, which cloud-init skips too). tries defaults to 10.
func PhoneHomeOf(cfg Config) (*PhoneHome, error) {
	raw, ok := cfg["phone_home"]
	if !ok {
		return nil, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("phone_home is a %T, want a mapping", raw)
	}
	ph := &PhoneHome{URL: scalar(m["url"]), Tries: 10}
	if ph.URL == "" {
		return nil, nil
	}
	switch post := m["post"].(type) {
	case nil:
		ph.Post = AllFields
	case string:
		if post != "all" {
			return nil, fmt.Errorf("phone_home post %q (want all or a list)", post)
		}
		ph.Post = AllFields
	case []any:
		for _, f := range post {
			ph.Post = append(ph.Post, scalar(f))
		}
	default:
		return nil, fmt.Errorf("phone_home post is a %T (want all or a list)", post)
	}
	if t, ok := m["tries"].(int); ok && t > 0 {
		ph.Tries = min(t, 100)
	}
	return ph, nil
}

// Form is the request cloud-init makes: the URL with $INSTANCE_ID (or
// ${INSTANCE_ID}) filled in, and the form fields asked for, "N/A" for any
// it has no value of. keys holds the host keys' public halves by field
// name (pub_key_ed25519: the .pub file's text).
func (ph *PhoneHome) Form(md MetaData, keys map[string]string) (string, url.Values, error) {
	host, fqdn := md.hostnames()
	all := map[string]string{"instance_id": md.InstanceID, "hostname": host, "fqdn": fqdn}
	for k, v := range keys {
		all[k] = v
	}
	form := url.Values{}
	for _, f := range ph.Post {
		v, ok := all[f]
		if !ok {
			v = "N/A"
		}
		form.Set(f, v)
	}
	u := strings.NewReplacer("${INSTANCE_ID}", md.InstanceID, "$INSTANCE_ID", md.InstanceID).Replace(ph.URL)
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return "", nil, fmt.Errorf("phone_home url %q: want an http or https URL", ph.URL)
	}
	return u, form, nil
}

// scalar is a YAML scalar as text ("" for anything else).
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}
