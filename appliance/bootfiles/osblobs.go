package bootfiles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// OS images (issue 18): each version of the catalog is one compressed raw
// disk image, a blob like a boot image's files. Image sync brings every
// version's blob to every node and announces it with raftfsm.OSHave;
// deploying machines fetch it from any node at /os/blobs/{sha256}.

// syncOS fetches the OS blobs this node lacks and announces those it holds;
// it adds every version's blob to referenced, so blob GC keeps them.
func (s *Server) syncOS(ctx context.Context, log *slog.Logger, images []store.OSImage, addrs map[string]string, referenced map[string]bool) error {
	for _, o := range images {
		for _, v := range o.Versions {
			referenced[v.File.SHA256] = true
		}
	}
	var errs []error
	for _, o := range images {
		for _, v := range o.Versions {
			if !s.conf.Blobs.Have(v.File) {
				if err := s.fetchBlob(ctx, log, v.File, v.Nodes, addrs); err != nil {
					errs = append(errs, fmt.Errorf("OS image %s version %s: %w", o.Name, v.Version, err))
					continue
				}
			}
			if slices.Contains(v.Nodes, s.conf.Node) {
				continue
			}
			_, err := s.conf.Cluster.Apply(ctx, &raftfsm.OSHave{Name: o.Name, OSVersion: v.Version, Node: s.conf.Node, SHA256: v.File.SHA256, Now: time.Now().UTC()})
			switch {
			case err == nil:
				log.Info("OS image synced", "os", o.Name, "version", v.Version)
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
				// Removed or replaced meanwhile: the next pass sees it.
			default:
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ServeOSBlob serves GET and HEAD /os/blobs/{sha256}: an OS version's
// compressed image, to the deploy agent. No credential (a deploying machine
// holds only its job token, checked on the API, not here: the image is
// public vendor content or the operator's own), but only a valid SHA-256
// that some version of the catalog names reaches the blob store.
func (s *Server) ServeOSBlob(w http.ResponseWriter, r *http.Request) error {
	sum := r.PathValue("sha256")
	if !ValidSHA256(sum) {
		s.m.BootRefused.Inc()
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "an OS blob is named by its SHA-256: 64 lowercase hex digits"}
	}
	var f store.ImageFile
	found := false
	if err := s.conf.DB.View(func(tx *store.Tx) error {
		images, err := tx.OSImages()
		for _, o := range images {
			for _, v := range o.Versions {
				if v.File.SHA256 == sum {
					f, found = v.File, true
				}
			}
		}
		return err
	}); err != nil {
		return err
	}
	if !found {
		s.m.BootRefused.Inc()
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no OS image version has that file"}
	}
	file, err := os.Open(s.conf.Blobs.Path(f.SHA256))
	if err != nil {
		w.Header().Set("Retry-After", "10")
		return &Error{Status: http.StatusServiceUnavailable, Code: "syncing", Message: "this node has not fetched that OS image yet; retry shortly"}
	}
	defer file.Close()
	w.Header().Set("Content-Type", "application/zstd")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Header().Set("ETag", `"`+f.SHA256+`"`)
	http.ServeContent(sendfileWriter{w}, r, "", time.Time{}, file)
	return nil
}
