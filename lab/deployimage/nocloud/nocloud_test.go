package nocloud

import (
	"bytes"
	"compress/gzip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/lab/testenv"
)

const metaData = "instance-id: i-0042\nlocal-hostname: web-1\n"

// A multipart user-data as the deploy's server writes it: its own part,
// then the operator's, each with the merge type that appends lists.
const multipartUserData = `Content-Type: multipart/mixed; boundary="BOUNDARY"
MIME-Version: 1.0

--BOUNDARY
Content-Type: text/cloud-config; charset="utf-8"
Merge-Type: list(append)+dict(no_replace,recurse_list)+str()

#cloud-config
hostname: web-1
fqdn: web-1.lab.example
ssh_authorized_keys: [ssh-ed25519 AAAA1 a@b]
phone_home:
  url: http://10.0.2.2:8080/api/v1/phone-home/tok-1?id=$INSTANCE_ID
  post: [instance_id, hostname, fqdn, pub_key_ed25519]
  tries: 3

--BOUNDARY
Content-Type: text/cloud-config; charset="utf-8"
Content-Transfer-Encoding: base64
Merge-Type: list(append)+dict(no_replace,recurse_list)+str()

` + "I2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogb3BlcmF0b3IKc3NoX2F1dGhvcml6ZWRfa2V5czogW3NzaC1lZDI1NTE5IEFBQUEyIGNAZF0K" + `

--BOUNDARY
Content-Type: text/x-shellscript

#!/bin/sh
echo not run
--BOUNDARY--
`

func TestParseUserData(t *testing.T) {
	md, err := ParseMetaData([]byte(metaData))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("#cloud-config\nhostname: zipped\n"))
	zw.Close()
	cases := map[string]struct {
		userData       string
		hostname, fqdn string
		keys           []any
		phoneHome      string // URL, "" for none
		form           url.Values
	}{
		"meta-data only":  {userData: "", hostname: "web-1", fqdn: "web-1.localdomain"},
		"plain hostname":  {userData: "#cloud-config\nhostname: db-2\n", hostname: "db-2", fqdn: "web-1.localdomain"},
		"dotted hostname": {userData: "#cloud-config\nhostname: db-2.lab\n", hostname: "db-2", fqdn: "db-2.lab"},
		"fqdn only":       {userData: "#cloud-config\nfqdn: db-3.lab.example\n", hostname: "db-3", fqdn: "db-3.lab.example"},
		"gzip":            {userData: gz.String(), hostname: "zipped", fqdn: "web-1.localdomain"},
		"a script":        {userData: "#!/bin/sh\necho hi\n", hostname: "web-1", fqdn: "web-1.localdomain"},
		"multipart, lists appended, first hostname kept": {
			userData: multipartUserData, hostname: "web-1", fqdn: "web-1.lab.example",
			keys:      []any{"ssh-ed25519 AAAA1 a@b", "ssh-ed25519 AAAA2 c@d"},
			phoneHome: "http://10.0.2.2:8080/api/v1/phone-home/tok-1?id=i-0042",
			// hostname and fqdn come from the datasource (meta-data), as in cc_phone_home.
			form: url.Values{"instance_id": {"i-0042"}, "hostname": {"web-1"}, "fqdn": {"web-1.localdomain"}, "pub_key_ed25519": {"ssh-ed25519 KEY host\n"}},
		},
		"default merge replaces": {
			userData: strings.ReplaceAll(multipartUserData, "Merge-Type: list(append)+dict(no_replace,recurse_list)+str()\n", ""),
			hostname: "operator", fqdn: "web-1.lab.example",
			keys:      []any{"ssh-ed25519 AAAA2 c@d"},
			phoneHome: "http://10.0.2.2:8080/api/v1/phone-home/tok-1?id=i-0042",
			form:      url.Values{"instance_id": {"i-0042"}, "hostname": {"web-1"}, "fqdn": {"web-1.localdomain"}, "pub_key_ed25519": {"ssh-ed25519 KEY host\n"}},
		},
		"post all": {
			userData: "#cloud-config\nphone_home: {url: 'https://h/x/${INSTANCE_ID}'}\n", hostname: "web-1", fqdn: "web-1.localdomain",
			phoneHome: "https://h/x/i-0042",
			form: url.Values{"instance_id": {"i-0042"}, "hostname": {"web-1"}, "fqdn": {"web-1.localdomain"},
				"pub_key_dsa": {"N/A"}, "pub_key_rsa": {"N/A"}, "pub_key_ecdsa": {"N/A"}, "pub_key_ed25519": {"ssh-ed25519 KEY host\n"}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseUserData([]byte(c.userData))
			if err != nil {
				t.Fatal(err)
			}
			h, f := Hostname(cfg, md)
			if h != c.hostname || f != c.fqdn {
				t.Errorf("Hostname = %q, %q; want %q, %q", h, f, c.hostname, c.fqdn)
			}
			if d := cmp.Diff(c.keys, cfg["ssh_authorized_keys"]); d != "" && c.keys != nil {
				t.Errorf("ssh_authorized_keys (-want +got):\n%s", d)
			}
			ph, err := PhoneHomeOf(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if c.phoneHome == "" {
				if ph != nil {
					t.Errorf("phone_home %+v, want none", ph)
				}
				return
			}
			if ph == nil {
				t.Fatal("no phone_home")
			}
			u, form, err := ph.Form(md, map[string]string{"pub_key_ed25519": "ssh-ed25519 KEY host\n"})
			if err != nil {
				t.Fatal(err)
			}
			if u != c.phoneHome {
				t.Errorf("url %q, want %q", u, c.phoneHome)
			}
			if d := cmp.Diff(c.form, form); d != "" {
				t.Errorf("form (-want +got):\n%s", d)
			}
		})
	}
}

// cloud-init's own make-mime writes the multipart a tool would; the parts
// come through base64-encoded.
func TestParseMakeMime(t *testing.T) {
	ci, ok := testenv.LookTool(t, "cloud-init")
	if !ok {
		return
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	os.WriteFile(a, []byte("#cloud-config\nhostname: from-mime\n"), 0o644)
	os.WriteFile(b, []byte("#cloud-config\nphone_home: {url: 'http://10.0.2.2:1/p/$INSTANCE_ID', post: [instance_id, fqdn]}\n"), 0o644)
	out, err := exec.Command(ci, "devel", "make-mime", "-a", a+":cloud-config", "-a", b+":cloud-config").Output()
	if err != nil {
		t.Fatalf("make-mime: %v", err)
	}
	cfg, err := ParseUserData(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	md := MetaData{InstanceID: "i-9", LocalHostname: "n.lab"}
	if h, f := Hostname(cfg, md); h != "from-mime" || f != "n.lab" {
		t.Errorf("Hostname = %q, %q", h, f)
	}
	ph, err := PhoneHomeOf(cfg)
	if err != nil || ph == nil {
		t.Fatalf("phone_home %+v, %v", ph, err)
	}
	u, form, err := ph.Form(md, nil)
	if err != nil || u != "http://10.0.2.2:1/p/i-9" || form.Encode() != "fqdn=n.lab&instance_id=i-9" {
		t.Errorf("Form = %q, %q, %v", u, form.Encode(), err)
	}
}

func TestBad(t *testing.T) {
	for name, ud := range map[string]string{
		"bad yaml":          "#cloud-config\nhostname: [\n",
		"no boundary":       "Content-Type: multipart/mixed\n\nx",
		"bad encoding":      "Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Transfer-Encoding: uuencode\nContent-Type: text/cloud-config\n\nx\n--b--\n",
		"bad base64":        "Content-Type: text/cloud-config\nContent-Transfer-Encoding: base64\n\n!!!!\n",
		"bad merge type":    "Content-Type: text/cloud-config\nMerge-Type: tree(x)\n\n#cloud-config\na: 1\n",
		"too big":           "#cloud-config\n" + strings.Repeat("a", MaxSeedBytes),
		"nested too deep":   strings.Repeat("Content-Type: multipart/mixed; boundary=b\n\n--b\n", 8) + "\n#cloud-config\n",
		"phone_home a list": "#cloud-config\nphone_home: [1]\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseUserData([]byte(ud))
			if err == nil {
				_, err = PhoneHomeOf(cfg)
			}
			if err == nil {
				t.Errorf("accepted; cfg %v", cfg)
			}
		})
	}
	for _, md := range []string{"local-hostname: x\n", "[", strings.Repeat(" ", MaxSeedBytes+1)} {
		if _, err := ParseMetaData([]byte(md)); err == nil {
			t.Errorf("meta-data %.20q accepted", md)
		}
	}
	ph := &PhoneHome{URL: "file:///etc/passwd", Post: AllFields}
	if _, _, err := ph.Form(MetaData{InstanceID: "i"}, nil); err == nil {
		t.Error("a file: URL accepted")
	}
}

// user-data is what a machine was handed: any bytes end in a config or an
// error, within the bounds.
func FuzzParseUserData(f *testing.F) {
	f.Add([]byte(multipartUserData))
	f.Add([]byte("#cloud-config\nhostname: a\nphone_home: {url: 'http://h/', post: all}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseUserData(b)
		if err != nil {
			return
		}
		Hostname(cfg, MetaData{InstanceID: "i"})
		if ph, err := PhoneHomeOf(cfg); err == nil && ph != nil {
			ph.Form(MetaData{InstanceID: "i"}, nil)
		}
	})
}
