package console

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
)

// TestConsoleSignsInByCertificate: a client.json that holds an
// administrator's certificate and no token signs the console in, as it
// does the CLI; with the certificate files gone it is an error, not the
// token form.
func TestConsoleSignsInByCertificate(t *testing.T) {
	n := nodetest.StartWith(t, nodetest.Options{HTTPS: true})
	keyPEM, csrPEM, err := pki.NewKeyAndCSR("admin:ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	var issued wire.IssuedCert
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := n.Do(t, http.MethodPost, "/api/v1/admin-certs", wire.AdminCertRequest{Name: "ada", CSR: string(csrPEM)}, nodetest.Bearer(n.Admin)...)
		if r.Status == http.StatusCreated {
			r.Decode(t, &issued)
			break
		}
		if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("admin cert: %s", r)
		}
		time.Sleep(250 * time.Millisecond)
	}
	dir := t.TempDir()
	files := map[string][]byte{"ada.pem": []byte(issued.PEM), "ada-key.pem": keyPEM, "ca.pem": []byte(issued.CAPEM)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "client.json")
	saved := ClientConfig{URL: "https://" + n.HTTPSAddr(), CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "ada.pem"), KeyFile: filepath.Join(dir, "ada-key.pem")}
	if err := SaveClientConfig(cfgPath, saved); err != nil {
		t.Fatal(err)
	}
	cl, cfg, _, err := Options{ConfigPath: cfgPath}.client()
	if err != nil || cl == nil || cfg.Token != "" {
		t.Fatalf("client from a certificate-only config: %v (client %v)", err, cl != nil)
	}
	if _, err := cl.Machines(context.Background(), 0, 0); err != nil {
		t.Fatalf("an admin read signed in by the certificate: %v", err)
	}
	var who wire.WhoAmI
	if err := cl.do(context.Background(), readTimeout, http.MethodGet, "/api/v1/whoami", nil, &who); err != nil || who.Actor != "admin:ada" {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	os.Remove(saved.KeyFile)
	if _, _, _, err := (Options{ConfigPath: cfgPath}).client(); err == nil {
		t.Fatal("a config whose key file is gone gave a client")
	}
}
