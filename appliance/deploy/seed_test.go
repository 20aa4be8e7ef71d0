package deploy

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/lab/testenv"
	"github.com/rollcall/rollcall/store"
)

var update = flag.Bool("update", false, "rewrite testdata/seed goldens")

const (
	edKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOp1KqI6tR2tQOb8rDZyVfGJ4u5fA3m3Vx2z3Zp9uQ1x op@example"
	rsaKey = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 ops \"laptop\""
)

// testCA stands for the cluster's CA certificate (its text is not parsed).
const testCA = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIRAJollcallTestCAAAAAAAAAAAwCgYIKoZIzj0EAwIw\nEjEQMA4GA1UEAxMHcm9sbGNhbGwwHhcNMjYxMjAyMDAwMDAwWhcNMzYxMjAyMDAw\n-----END CERTIFICATE-----\n"

// The tags of the spec's example: a manual rack tag without a fragment,
// a manual burn-in tag with a script, and the gpu rule tag with packages.
var testTags = map[string]store.Tag{
	"gpu":     {Name: "gpu", CloudConfig: "#cloud-config\npackages: [nvidia-driver]\nruncmd:\n  - [nvidia-smi]\n"},
	"burn-in": {Name: "burn-in", CloudConfig: "#!/bin/sh\nstress-ng --cpu 0 --timeout 1h\n"},
	"rack-3":  {Name: "rack-3"},
	"ib":      {Name: "ib", CloudConfig: "#cloud-config\npackages: [rdma-core]\n"},
}

func seedCases() map[string]Seed {
	m := store.Machine{ID: "m-00000000c0de", Tags: []string{"rack-3", "burn-in"}, AutoTags: []string{"ib", "gpu", "burn-in"}}
	base := Seed{JobID: "j-0000019ad5a1c0de", Hostname: "node1", FQDN: "node1.lab.example", PhoneHome: "http://10.0.0.2:8080/api/v1/phone-home/rcj1.TOKEN"}
	plain := base
	plain.FQDN = ""
	full := base
	full.UserData = store.JobUserData{SSHKeys: []string{edKey, rsaKey}, Packages: []string{"htop", "nvme-cli"}, Upgrade: true,
		Operator: "#cloud-config\npackages: [jq]\nwrite_files:\n  - path: /etc/motd\n    content: deployed by rollcall\n"}
	full.Tags = TagFragments(m, testTags)
	full.CAPEM = testCA
	script := base
	script.UserData.Operator = "#!/bin/bash\necho hello > /root/hello\n"
	mimeOp := base
	mimeOp.UserData.Operator = "Content-Type: multipart/mixed; boundary=\"OP\"\nMIME-Version: 1.0\n\n--OP\nContent-Type: text/cloud-config\n\n#cloud-config\npackages: [tmux]\n--OP\nContent-Type: text/x-shellscript\n\n#!/bin/sh\ntrue\n--OP--\n"
	return map[string]Seed{"plain": plain, "full": full, "script": script, "mime": mimeOp}
}

// Golden seeds: the parts in their merge order (Rollcall's, the manual
// tags', the auto tags', the operator's), each with the merge type.
func TestUserDataGolden(t *testing.T) {
	for name, s := range seedCases() {
		t.Run(name, func(t *testing.T) {
			ud, err := UserData(s)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".user-data", ud)
			if n, m := strings.Count(ud, "\nMerge-Type: "+MergeType+"\n"), strings.Count(ud, "\nContent-Type: text/"); n != m || n == 0 {
				t.Errorf("%d parts, %d with the merge type", m, n)
			}
		})
	}
	golden(t, "meta-data", MetaData("j-0000019ad5a1c0de", "node1"))
}

func TestTagFragmentsOrder(t *testing.T) {
	m := store.Machine{Tags: []string{"rack-3", "burn-in"}, AutoTags: []string{"ib", "gpu", "burn-in", "gone"}}
	var got []string
	for _, f := range TagFragments(m, testTags) {
		got = append(got, f.Tag)
	}
	// Manual first (sorted), then auto (sorted), each once; no fragment
	// (rack-3) or no definition (gone): left out.
	if want := []string{"burn-in", "gpu", "ib"}; !slices.Equal(got, want) {
		t.Fatalf("fragments %v, want %v", got, want)
	}
}

func TestUserDataRefuses(t *testing.T) {
	for name, op := range map[string]string{
		"plain text":     "hello\n",
		"include":        "#include http://example.invalid/x\n",
		"mime, no parts": "Content-Type: multipart/mixed; boundary=\"B\"\n\n--B--\n",
		"mime, bad part": "Content-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/plain\n\nhello\n--B--\n",
		"not multipart":  "Content-Type: text/plain\n\nhello\n",
	} {
		t.Run(name, func(t *testing.T) {
			if err := CheckOperator(op); err == nil {
				t.Fatalf("%q accepted", op)
			}
			if _, err := UserData(Seed{JobID: "j-0000000000000001", Hostname: "h", UserData: store.JobUserData{Operator: op}}); err == nil {
				t.Fatalf("UserData accepted %q", op)
			}
		})
	}
	// A boundary that a part contains is changed, not broken.
	s := Seed{JobID: "j-0000000000000001", Hostname: "h", UserData: store.JobUserData{Operator: "#!/bin/sh\necho ==rollcall-j-0000000000000001==\n"}}
	ud, err := UserData(s)
	if err != nil || !strings.Contains(ud, `boundary="==rollcall-j-0000000000000001-1=="`) {
		t.Fatalf("boundary not moved: %v\n%s", err, ud)
	}
}

// cloud-init itself (the Debian package's Python modules) splits the
// golden user-data into its parts and merges the cloud-config ones as a
// first boot would: the tags' packages and the operator's append to the
// deployment's, the first part's hostname stays.
func TestUserDataCloudInitMerges(t *testing.T) {
	testenv.NeedFile(t, "cloud-init's Python modules (apt-get install cloud-init)", "/usr/lib/python3/dist-packages/cloudinit/user_data.py")
	py := testenv.NeedTool(t, "/usr/bin/python3")[0]
	type merged struct {
		Parts  []string       `json:"parts"`
		Config map[string]any `json:"config"`
	}
	run := func(t *testing.T, ud string) merged {
		f := filepath.Join(t.TempDir(), "user-data")
		os.WriteFile(f, []byte(ud), 0o600)
		out, err := exec.Command(py, "testdata/cloudinit-merge.py", f).Output()
		if err != nil {
			t.Fatalf("cloud-init: %v %s", err, out)
		}
		var m merged
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return m
	}
	cases := seedCases()
	ud, _ := UserData(cases["full"])
	m := run(t, ud)
	if want := []string{"text/cloud-config", "text/x-shellscript", "text/cloud-config", "text/cloud-config", "text/cloud-config"}; !slices.Equal(m.Parts, want) {
		t.Errorf("parts %v, want %v", m.Parts, want)
	}
	var pkgs []string
	for _, p := range m.Config["packages"].([]any) {
		pkgs = append(pkgs, p.(string))
	}
	if want := []string{"htop", "nvme-cli", "nvidia-driver", "rdma-core", "jq"}; !slices.Equal(pkgs, want) {
		t.Errorf("merged packages %v, want %v (lists append, in part order)", pkgs, want)
	}
	if m.Config["hostname"] != "node1" || m.Config["fqdn"] != "node1.lab.example" || m.Config["disable_root"] != false || m.Config["package_upgrade"] != true {
		t.Errorf("merged config %v", m.Config)
	}
	if keys := m.Config["ssh_authorized_keys"].([]any); len(keys) != 2 || keys[1] != rsaKey {
		t.Errorf("keys %v", keys)
	}
	ph := m.Config["phone_home"].(map[string]any)
	if ph["url"] != cases["full"].PhoneHome || ph["post"] != "all" {
		t.Errorf("phone_home %v", ph)
	}
	if ca, ok := m.Config["ca_certs"].(map[string]any); !ok || len(ca["trusted"].([]any)) != 1 || ca["trusted"].([]any)[0] != testCA {
		t.Errorf("ca_certs %v, want the cluster CA as one trusted certificate", m.Config["ca_certs"])
	}
	if _, ok := m.Config["write_files"]; !ok || m.Config["runcmd"] == nil {
		t.Errorf("the tag's runcmd or the operator's write_files is lost: %v", m.Config)
	}
	ud, _ = UserData(cases["mime"])
	if m := run(t, ud); !slices.Contains(m.Config["packages"].([]any), any("tmux")) || !slices.Contains(m.Parts, "text/x-shellscript") {
		t.Errorf("the operator's MIME parts: %+v", m)
	}
}

func FuzzUserData(f *testing.F) {
	for _, s := range seedCases() {
		f.Add(s.UserData.Operator)
	}
	f.Add("Content-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/cloud-config\n\n#cloud-config\n--B")
	f.Fuzz(func(t *testing.T, op string) {
		s := Seed{JobID: "j-0000000000000001", Hostname: "h", UserData: store.JobUserData{Operator: op}}
		ud, err := UserData(s)
		if (err == nil) != (CheckOperator(op) == nil) {
			t.Fatalf("UserData and CheckOperator disagree on %q: %v", op, err)
		}
		if err == nil && !strings.HasPrefix(ud, "Content-Type: multipart/mixed;") {
			t.Fatalf("not a MIME document: %q", ud)
		}
	})
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "seed", name)
	if *update {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}
