package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollcall/rollcall/appliance/console"
	"github.com/rollcall/rollcall/appliance/pki"
	"github.com/rollcall/rollcall/appliance/wire"
)

// cmdAdminCert is rollcall admin-cert: administrators' client
// certificates. request makes the key here and sends only a CSR.
func cmdAdminCert(args []string, s streams) error {
	if len(args) == 0 {
		return errors.New("usage: rollcall admin-cert request NAME [-url https://…] [-dir DIR] | list [-json] | revoke NAME [-serial S]")
	}
	switch args[0] {
	case "request":
		return adminCertRequest(args[1:], s.stdout)
	case "list":
		return reader[wire.CertList]{name: "admin-cert list", usage: "rollcall admin-cert list [-json]", path: at("/api/v1/admin-certs"), table: printCerts}.run(args[1:], s.stdout)
	case "revoke":
		fs := newFlags("admin-cert revoke", "rollcall admin-cert revoke NAME [-serial S] [-json]")
		serial := fs.String("serial", "", "revoke only the certificate with this serial (hex)")
		asJSON := fs.Bool("json", false, "print JSON")
		c, err := fs.client(args[1:], 1)
		if err != nil {
			return err
		}
		path := "/api/v1/admin-certs/" + url.PathEscape(fs.Arg(0))
		if *serial != "" {
			path += "?serial=" + url.QueryEscape(strings.ToLower(*serial))
		}
		return revokeAndPrint(c, path, *asJSON, s.stdout)
	}
	return fmt.Errorf("unknown admin-cert command %q (request, list, revoke)", args[0])
}

func revokeAndPrint(c *client, path string, asJSON bool, w io.Writer) error {
	var r wire.CertsRevoked
	if err := c.do(http.MethodDelete, path, nil, &r); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	fmt.Fprintf(w, "revoked %d certificate(s) of %s %s; every node refuses them from its next request\n", r.Revoked, r.Kind, r.Name)
	return nil
}

// adminCertRequest makes a key and CSR for admin:NAME, has the cluster
// sign it (with the token, this once), and writes the key, the
// certificate, the CA and a .p12 for the browser beside the client
// configuration, which it points at them.
func adminCertRequest(args []string, w io.Writer) error {
	fs := newFlags("admin-cert request", "rollcall admin-cert request NAME [-url https://HOST:PORT] [-dir DIR] [-json]")
	apiURL := fs.String("url", "", "the HTTPS API the configuration signs in to with the certificate (default: the URL in use when it is https)")
	dir := fs.String("dir", "", "where the key, certificate and .p12 go (default: beside the client configuration)")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	if err := pki.ValidCertName(name); err != nil {
		return err
	}
	cfgPath, err := console.DefaultConfigPath()
	if err != nil {
		return err
	}
	if *dir == "" {
		*dir = filepath.Dir(cfgPath)
	}
	target := *apiURL
	if target == "" && strings.HasPrefix(c.api.Base, "https://") {
		target = c.api.Base
	}
	if target != "" && !strings.HasPrefix(target, "https://") {
		return fmt.Errorf("-url %q: a client certificate signs in over https only", target)
	}
	keyPEM, csrPEM, err := pki.NewKeyAndCSR(pki.AdminPrefix+name, nil)
	if err != nil {
		return err
	}
	var issued wire.IssuedCert
	if err := c.do(http.MethodPost, "/api/v1/admin-certs", wire.AdminCertRequest{Name: name, CSR: string(csrPEM)}, &issued); err != nil {
		return err
	}
	password, err := randomPassword()
	if err != nil {
		return err
	}
	p12, err := pki.EncodePKCS12([]byte(issued.PEM), keyPEM, []byte(issued.CAPEM), password)
	if err != nil {
		return err
	}
	base := filepath.Join(*dir, "admin-"+name)
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{base + "-key.pem", keyPEM, 0o600},
		{base + ".pem", []byte(issued.PEM), 0o644},
		{filepath.Join(*dir, "ca.pem"), []byte(issued.CAPEM), 0o644},
		{base + ".p12", p12, 0o600},
		{base + ".p12.password", []byte(password + "\n"), 0o600},
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	note := ""
	if target != "" {
		cfg, _ := console.LoadClientConfig(cfgPath)
		cfg.URL, cfg.CAFile, cfg.CertFile, cfg.KeyFile = target, files[2].path, files[1].path, files[0].path
		if err := console.SaveClientConfig(cfgPath, cfg); err != nil {
			return err
		}
		note = "the CLI signs in with it from " + cfgPath
	} else {
		note = "the client configuration is unchanged: give -url https://HOST:PORT to sign in with the certificate"
	}
	if *asJSON {
		return json.NewEncoder(w).Encode(issued)
	}
	fmt.Fprintf(w, "certificate %s for admin:%s, serial %s, valid until %s\n", files[1].path, name, issued.Cert.Serial, issued.Cert.NotAfter.Format(time.RFC3339))
	fmt.Fprintf(w, "key         %s (made here; only the CSR was sent)\n", files[0].path)
	fmt.Fprintf(w, "browser     %s (import it; its password is in %s)\n", files[3].path, files[4].path)
	fmt.Fprintln(w, note)
	return nil
}

// writeFile writes data atomically with mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rollcall-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func randomPassword() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// caIssue is rollcall ca issue NAME -host h1,h2 [-client]: a certificate
// for another service; the key is made here.
func caIssue(args []string, w io.Writer) error {
	fs := newFlags("ca issue", "rollcall ca issue NAME -host h1,h2 [-client] [-dir DIR] [-json]")
	hosts := fs.String("host", "", "comma-separated DNS names and addresses the certificate is for (required)")
	clientAuth := fs.Bool("client", false, "also for client authentication")
	dir := fs.String("dir", ".", "where NAME.pem, NAME-key.pem and ca.pem go")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	name := fs.Arg(0)
	hs := splitList(*hosts)
	if len(hs) == 0 {
		return errors.New("usage: " + fs.usage + ": -host is required")
	}
	keyPEM, csrPEM, err := pki.NewKeyAndCSR(name, hs)
	if err != nil {
		return err
	}
	var issued wire.IssuedCert
	if err := c.do(http.MethodPost, "/api/v1/ca/issue", wire.ServiceCertRequest{Name: name, Hosts: hs, Client: *clientAuth, CSR: string(csrPEM)}, &issued); err != nil {
		return err
	}
	return writeIssued(*dir, name, keyPEM, issued, *asJSON, w)
}

// caIntermediate is rollcall ca intermediate NAME -permit dom,cidr -csr
// FILE: the key stays wherever the CSR was made.
func caIntermediate(args []string, w io.Writer) error {
	fs := newFlags("ca intermediate", "rollcall ca intermediate NAME -permit dom,cidr -csr FILE [-dir DIR] [-json]")
	permit := fs.String("permit", "", "comma-separated DNS domains and CIDRs the intermediate may sign for (required)")
	csrFile := fs.String("csr", "", "the intermediate's CSR, PEM (required)")
	dir := fs.String("dir", ".", "where NAME.pem and ca.pem go")
	asJSON := fs.Bool("json", false, "print JSON")
	c, err := fs.client(args, 1)
	if err != nil {
		return err
	}
	if *permit == "" || *csrFile == "" {
		return errors.New("usage: " + fs.usage + ": -permit and -csr are required")
	}
	csr, err := readBounded(*csrFile, 32<<10)
	if err != nil {
		return err
	}
	var issued wire.IssuedCert
	if err := c.do(http.MethodPost, "/api/v1/ca/intermediates", wire.IntermediateRequest{Name: fs.Arg(0), Permit: splitList(*permit), CSR: string(csr)}, &issued); err != nil {
		return err
	}
	return writeIssued(*dir, fs.Arg(0), nil, issued, *asJSON, w)
}

func writeIssued(dir, name string, keyPEM []byte, issued wire.IssuedCert, asJSON bool, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	certPath := filepath.Join(dir, name+".pem")
	if keyPEM != nil {
		if err := writeFile(filepath.Join(dir, name+"-key.pem"), keyPEM, 0o600); err != nil {
			return err
		}
	}
	if err := writeFile(certPath, []byte(issued.PEM), 0o644); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "ca.pem"), []byte(issued.CAPEM), 0o644); err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(w).Encode(issued)
	}
	fmt.Fprintf(w, "%s certificate %s for %s, serial %s, valid until %s\n", issued.Cert.Kind, certPath, name, issued.Cert.Serial, issued.Cert.NotAfter.Format(time.RFC3339))
	if keyPEM != nil {
		fmt.Fprintf(w, "key %s (made here)\n", filepath.Join(dir, name+"-key.pem"))
	}
	return nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

func printCerts(w io.Writer, v wire.CertList) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tSERIAL\tSTATE\tNOT AFTER\tISSUED BY\tNAMES")
	for _, c := range v.Certificates {
		names := strings.Join(append(append([]string{}, c.Hosts...), c.Permit...), ",")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Kind, c.Name, c.Serial, c.State, c.NotAfter.Format("2006-01-02"), c.IssuedBy, names)
	}
	return tw.Flush()
}

// cmdAudit is rollcall audit: the cluster's audit log, newest first.
func cmdAudit(args []string, s streams) error {
	return reader[wire.AuditLog]{name: "audit", usage: "rollcall audit [-limit N] [-json]", path: at("/api/v1/audit"),
		filter: "limit", filterHelp: "how many events, newest first (default 100, at most 1000)", table: printAudit}.run(args, s.stdout)
}

func printAudit(w io.Writer, v wire.AuditLog) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tACTOR\tFROM\tNODE\tACTION\tTARGET\tOUTCOME")
	for _, e := range v.Events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format(time.RFC3339), e.Actor, e.From, e.Node, e.Action, e.Target, e.Outcome)
	}
	return tw.Flush()
}
