package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ClientConfig is ~/.config/rollcall/client.json: where the API is and the
// admin token to call it with. The console writes it after asking once; the
// CLI reads it when ROLLCALL_URL/ROLLCALL_TOKEN are unset. It holds a
// secret, so it is written with mode 0600 and refused when others can read it.
//
//	{"url": "https://10.0.0.5:8443", "token": "…", "ca_file": "/home/op/.config/rollcall/ca.pem"}
type ClientConfig struct {
	URL    string `json:"url"`
	Token  string `json:"token"`
	CAFile string `json:"ca_file,omitempty"` // the cluster CA (PEM), for an https URL
	// An administrator's certificate and key (rollcall admin-cert
	// request): the CLI signs in with them over https instead of the
	// token.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
}

// HasCert reports whether the config names an administrator's
// certificate and key.
func (c ClientConfig) HasCert() bool { return c.CertFile != "" && c.KeyFile != "" }

// DefaultConfigPath is $XDG_CONFIG_HOME/rollcall/client.json, else
// ~/.config/rollcall/client.json (on every OS, as the docs say).
func DefaultConfigPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "rollcall", "client.json"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("client config: %w", err)
	}
	return filepath.Join(home, ".config", "rollcall", "client.json"), nil
}

// LoadClientConfig reads a client config. A missing file is an error that
// matches fs.ErrNotExist.
func LoadClientConfig(path string) (ClientConfig, error) {
	var c ClientConfig
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("client config: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return c, fmt.Errorf("client config: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return c, fmt.Errorf("client config %s: mode %04o lets others read the admin token; chmod 600 it", path, st.Mode().Perm())
	}
	if err := json.NewDecoder(f).Decode(&c); err != nil {
		return c, fmt.Errorf("client config %s: %w", path, err)
	}
	if c.URL == "" || (c.Token == "" && !c.HasCert()) {
		return c, fmt.Errorf("client config %s: url and a token (or cert_file and key_file) are required", path)
	}
	return c, nil
}

// SaveClientConfig writes a client config with mode 0600 (its directory
// 0700), replacing any earlier one atomically.
func SaveClientConfig(path string, c ClientConfig) error {
	if c.URL == "" || (c.Token == "" && !c.HasCert()) {
		return errors.New("client config: url and a token (or cert_file and key_file) are required")
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".client-*.json")
	if err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("client config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("client config: %w", err)
	}
	return nil
}
