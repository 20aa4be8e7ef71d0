package overlay

import (
	"embed"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/rollcall/rollcall/store"
)

// The overlays shipped as examples (rollcall overlay import NAME -example):
// compute, the one a Slurm compute node needs: its hostname, /etc/hosts of
// every node, slurm.conf node lines and gres.conf from the commissioning
// inventory, its own SSH host key, root's authorized_keys (the variable
// root_authorized_keys) and the munge key. Its variables: cluster_name,
// slurm_controller, slurm_controller_ip, partition, root_authorized_keys.
//
//go:embed all:examples
var examples embed.FS

// exampleModes are the modes of files that must not be world-readable.
var exampleModes = map[string]uint32{
	"system/etc/ssh/ssh_host_ed25519_key.tmpl": 0o600,
	"system/etc/munge/munge.key.tmpl":          0o400,
	"system/root/.ssh/authorized_keys.tmpl":    0o600,
}

// Examples lists the example overlays' names.
func Examples() []string {
	ents, _ := fs.ReadDir(examples, "examples")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// Example returns an example overlay's files.
func Example(name string) ([]store.OverlayFile, error) {
	if !slices.Contains(Examples(), name) {
		return nil, store.Errorf(store.ErrNotFound, "no example overlay %q (there are: %s)", store.Clip(name), strings.Join(Examples(), ", "))
	}
	root := path.Join("examples", name)
	var files []store.OverlayFile
	err := fs.WalkDir(examples, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := examples.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root+"/")
		mode := uint32(0o644)
		if m, ok := exampleModes[rel]; ok {
			mode = m
		}
		files = append(files, store.OverlayFile{Path: rel, Mode: mode, Content: b})
		return nil
	})
	store.SortOverlayFiles(files)
	return files, err
}
