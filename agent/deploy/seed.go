package deploy

import (
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// Where the seed and the trust anchors go in the deployed root. cloud-init's
// ds-identify finds NoCloud when both meta-data and user-data are in the
// seed directory; it uses the last datasource_list it reads, hence "99-".
const (
	seedDir        = "var/lib/cloud/seed/nocloud"
	datasourceFile = "etc/cloud/cloud.cfg.d/99-rollcall-datasource.cfg"
	datasourceCfg  = "# Written by the Rollcall deploy agent: the seed is in " + "/" + seedDir + ".\ndatasource_list: [NoCloud, None]\n"
	caDebian       = "usr/local/share/ca-certificates/rollcall-ca.crt"
	caRHEL         = "etc/pki/ca-trust/source/anchors/rollcall-ca.pem"
	autorelabel    = ".autorelabel"
)

// writeSeed writes the NoCloud seed into the root mounted at dir. Paths are
// resolved inside the image (os.Root): a symlink in the image that points
// out of it is refused, never followed onto the agent's own file system.
func writeSeed(dir string, s Seed) ([]string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	files := []struct {
		name string
		data string
		mode os.FileMode
	}{
		{path.Join(seedDir, "meta-data"), s.MetaData, 0o600},
		{path.Join(seedDir, "user-data"), s.UserData, 0o600}, // may carry keys and passwords
	}
	if s.NetworkConfig != "" {
		files = append(files, struct {
			name string
			data string
			mode os.FileMode
		}{path.Join(seedDir, "network-config"), s.NetworkConfig, 0o600})
	}
	if s.UdevRules != "" && validUdevPath(s.UdevRulesPath) {
		files = append(files, struct {
			name string
			data string
			mode os.FileMode
		}{strings.TrimPrefix(s.UdevRulesPath, "/"), s.UdevRules, 0o644})
	}
	var wrote []string
	for _, f := range files {
		if err := writeIn(r, f.name, []byte(f.data), f.mode); err != nil {
			return wrote, err
		}
		wrote = append(wrote, "/"+f.name)
	}
	// A network-config left by the image would be used with ours missing.
	if s.NetworkConfig == "" {
		if err := r.Remove(path.Join(seedDir, "network-config")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return wrote, fmt.Errorf("remove the image's own network-config: %w", err)
		}
	}
	if err := writeIn(r, datasourceFile, []byte(datasourceCfg), 0o644); err != nil {
		return wrote, err
	}
	return append(wrote, "/"+datasourceFile), nil
}

// validUdevPath: the rules go directly in /etc/udev/rules.d as a .rules
// file, nowhere else the server could name.
func validUdevPath(p string) bool {
	dir, file := path.Split(p)
	return dir == "/etc/udev/rules.d/" && strings.HasSuffix(file, ".rules") && len(file) > len(".rules") &&
		!strings.ContainsAny(file, "/\\\x00") && file[0] != '.' && len(p) <= 128
}

// writeTrust writes the cluster CA into the trust anchors of the image's
// family (Debian: update-ca-certificates reads .crt files; RHEL:
// update-ca-trust reads anchors/), both when os-release does not say, and
// /.autorelabel when asked.
func writeTrust(dir, caPEM string, relabel bool) ([]string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var wrote []string
	if caPEM != "" {
		if err := checkPEM(caPEM); err != nil {
			return nil, err
		}
		for _, p := range caPaths(osRelease(dir)) {
			if err := writeIn(r, p, []byte(caPEM), 0o644); err != nil {
				return wrote, err
			}
			wrote = append(wrote, "/"+p)
		}
	}
	if relabel {
		if err := writeIn(r, autorelabel, nil, 0o644); err != nil {
			return wrote, err
		}
		wrote = append(wrote, "/"+autorelabel)
	}
	return wrote, nil
}

func caPaths(id string, like []string) []string {
	fam := append([]string{id}, like...)
	deb := slices.ContainsFunc(fam, func(s string) bool { return s == "debian" || s == "ubuntu" })
	rhel := slices.ContainsFunc(fam, func(s string) bool {
		return s == "rhel" || s == "fedora" || s == "centos" || s == "rocky" || s == "almalinux"
	})
	switch {
	case deb && !rhel:
		return []string{caDebian}
	case rhel && !deb:
		return []string{caRHEL}
	}
	return []string{caDebian, caRHEL}
}

// checkPEM accepts only PEM certificates, so nothing else lands among the
// trust anchors.
func checkPEM(s string) error {
	rest := []byte(s)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("ca_pem holds a %q block: only certificates belong in the trust anchors", b.Type)
		}
		n++
	}
	if n == 0 {
		return errors.New("ca_pem holds no PEM certificate")
	}
	return nil
}

func writeIn(r *os.Root, name string, data []byte, mode os.FileMode) error {
	if err := r.MkdirAll(path.Dir(name), 0o755); err != nil {
		return fmt.Errorf("create /%s in the image: %w", path.Dir(name), err)
	}
	if err := r.WriteFile(name, data, mode); err != nil {
		return fmt.Errorf("write /%s in the image: %w", name, err)
	}
	if err := r.Chmod(name, mode); err != nil { // WriteFile keeps an existing file's mode
		return fmt.Errorf("chmod /%s in the image: %w", name, err)
	}
	return nil
}
