package bootfiles

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/store"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// The templates alone, against golden files: one per action, for the iPXE
// script (testdata/boot/*.ipxe) and the pxelinux file (*.pxelinux), which
// see the same data.
func TestBootTemplateGolden(t *testing.T) {
	base := BootData{
		MAC: "52:54:00:12:34:56", Kernel: "http://10.0.0.2:8080/images/commissioning/kernel",
		Initrd: "http://10.0.0.2:8080/images/commissioning/initrd",
		Args:   "rollcall.server=http://10.0.0.2:8080 rollcall.token=TOKEN rollcall.ca=FINGERPRINT console=ttyS0",
		Retry:  "http://10.0.0.2:8080/boot/ipxe?mac=${mac}",
	}
	cases := map[string]BootData{
		"commission-unknown": {Action: "commission"},
		"commission-new":     {Action: "commission", Machine: "m-0123456789ab", State: store.StateNew},
		"poweroff-ready":     {Action: "poweroff", Machine: "m-0123456789ab", State: store.StateReady},
		"local-deployed":     {Action: "local", Machine: "m-0123456789ab", State: "deployed"},
		"deploy-deploying":   {Action: "deploy", Machine: "m-0123456789ab", State: "deploying", Job: "j-0000019ad5a1c0de"},
		"deploy-releasing":   {Action: "deploy", Machine: "m-0123456789ab", State: "releasing", Job: "j-0000019ad5a1c0df"},
		"wait-no-image":      {Action: "wait", Message: `no image "commissioning" yet`},
		"stateless-booted":   {Action: "stateless", Machine: "m-0123456789ab", State: "booted", Node: "node007", Profile: "compute"},
	}
	for file, ext := range map[string]string{"boot.ipxe": ".ipxe", "pxelinux.cfg": ".pxelinux"} {
		tmpl, err := loadTemplate(t.TempDir(), file)
		if err != nil {
			t.Fatal(err)
		}
		for name, d := range cases {
			t.Run(file+"/"+name, func(t *testing.T) {
				d.MAC, d.Kernel, d.Initrd, d.Args, d.Retry = base.MAC, base.Kernel, base.Initrd, base.Args, base.Retry
				if d.Action == "stateless" {
					d.Kernel, d.Initrd = "http://10.0.0.2:8080/images/compute-debian13/kernel", "http://10.0.0.2:8080/images/compute-debian13/initrd"
					d.Args = "rollcall.mode=stateless rollcall.server=http://10.0.0.2:8080 rollcall.tls=https://10.0.0.2:8443 rollcall.ca=FINGERPRINT " +
						"rollcall.node=rcn1.m-0123456789ab.4711.SIG rollcall.root=http://10.0.0.2:8080/images/compute-debian13/squashfs " +
						"rollcall.root_sha256=" + strings.Repeat("ab", 32) + " hostname=node007 console=ttyS0"
				}
				if d.Action == "poweroff" && ext == ".pxelinux" {
					d.Kernel, d.Initrd, d.Args = "", "", "" // poweroff.c32 needs no image
				}
				var buf bytes.Buffer
				if err := tmpl.Execute(&buf, d); err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", "boot", name+ext)
				if *updateGolden {
					os.WriteFile(golden, buf.Bytes(), 0o644)
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if !bytes.Equal(buf.Bytes(), want) {
					t.Fatalf("%s differs from %s:\n%s", file, golden, buf.String())
				}
			})
		}
	}
}

func TestBootTemplateOverride(t *testing.T) {
	for file, header := range map[string]string{"boot.ipxe": "#!ipxe\n", "pxelinux.cfg": "DEFAULT x\n"} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "templates"), 0o755)
		os.WriteFile(filepath.Join(dir, "templates", file), []byte(header+"echo custom {{ .MAC }}\n"), 0o644)
		tmpl, err := loadTemplate(dir, file)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		tmpl.Execute(&buf, BootData{MAC: "52:54:00:00:00:01"})
		if buf.String() != header+"echo custom 52:54:00:00:00:01\n" {
			t.Fatalf("%s: override not used: %q", file, buf.String())
		}
		// A broken override fails at start with its file name, not at boot.
		os.WriteFile(filepath.Join(dir, "templates", file), []byte("{{ .Nope }}"), 0o644)
		if _, err := loadTemplate(dir, file); err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("%s: broken override accepted: %v", file, err)
		}
	}
}
