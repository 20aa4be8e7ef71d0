package bootfiles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// imageSyncEvery is how often image sync looks again with no change to
// wake it: a holder that was down may be back.
const imageSyncEvery = 30 * time.Second

// WakeSync makes image sync look again now (an image was just recorded).
func (s *Server) WakeSync() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run is image sync, which keeps this node's blob store complete: whenever
// images or the members change (and every imageSyncEvery), it fetches
// missing files from nodes that hold them, verifies them, and tells the
// cluster it holds them. It returns when ctx ends.
func (s *Server) Run(ctx context.Context, log *slog.Logger) error {
	// Blobs are garbage-collected only when the set of named files changed
	// or a sync period passed, not on every wake-up.
	var gcRefs string
	var gcAt time.Time
	return s.conf.DB.Follow(ctx, []string{store.TableImages, store.TableOSImages, store.TableCluster}, imageSyncEvery, s.wake, func(ctx context.Context) error {
		refs, err := s.syncOnce(ctx, log)
		if err != nil && ctx.Err() == nil {
			log.Warn("image sync incomplete; will retry", "err", err)
		}
		if key := strings.Join(slices.Sorted(maps.Keys(refs)), ","); refs != nil && (key != gcRefs || time.Since(gcAt) >= imageSyncEvery) {
			s.conf.Blobs.gc(refs, time.Now(), log)
			gcRefs, gcAt = key, time.Now()
		}
		return nil
	})
}

// syncOnce fetches what this node lacks; it returns the blobs images name.
func (s *Server) syncOnce(ctx context.Context, log *slog.Logger) (map[string]bool, error) {
	var images []store.Image
	var osImages []store.OSImage
	nodes := map[string]string{}
	if err := s.conf.DB.View(func(tx *store.Tx) error {
		var err error
		if images, err = tx.Images(); err != nil {
			return err
		}
		if osImages, err = tx.OSImages(); err != nil {
			return err
		}
		ns, err := tx.Nodes()
		for _, nd := range ns {
			nodes[nd.Name] = nd.RaftAddr
		}
		return err
	}); err != nil {
		return nil, err
	}
	var errs []error
	referenced := map[string]bool{}
	for _, im := range images {
		for _, f := range im.Files {
			referenced[f.SHA256] = true
		}
	}
	for _, im := range images {
		complete := true
		for _, f := range im.Files {
			if s.conf.Blobs.Have(f) {
				continue
			}
			if err := s.fetchBlob(ctx, log, f, im.Nodes, nodes); err != nil {
				errs = append(errs, fmt.Errorf("image %s file %s: %w", im.Name, f.Name, err))
				complete = false
			}
		}
		if complete && !slices.Contains(im.Nodes, s.conf.Node) {
			if _, err := s.conf.Cluster.Apply(ctx, &raftfsm.ImageHave{Name: im.Name, Node: s.conf.Node, Files: raftfsm.ImageFilesBody(im.Files), Now: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrConflict) {
				errs = append(errs, err)
			} else if err == nil {
				log.Info("image synced", "image", im.Name)
			}
		}
	}
	errs = append(errs, s.syncOS(ctx, log, osImages, nodes, referenced))
	return referenced, errors.Join(errs...)
}

// fetchBlob tries each holder in turn; a copy whose checksum does not match
// is refused and the next holder is asked.
func (s *Server) fetchBlob(ctx context.Context, log *slog.Logger, f store.ImageFile, holders []string, addrs map[string]string) error {
	var errs []error
	for _, h := range holders {
		if h == s.conf.Node || addrs[h] == "" {
			continue
		}
		err := s.conf.Cluster.Stream(ctx, addrs[h], "/v1/blobs/"+f.SHA256, func(r io.Reader) error {
			_, _, err := s.conf.Blobs.Write(r, f.SHA256)
			return err
		})
		if err == nil {
			s.m.ImageFetched.Inc()
			return nil
		}
		s.m.ImageRefused.Inc()
		log.Warn("image file fetch failed", "from", h, "sha256", f.SHA256[:12], "err", err)
		errs = append(errs, fmt.Errorf("from %s: %w", h, err))
	}
	if len(errs) == 0 {
		return errors.New("no other node holds it yet")
	}
	return errors.Join(errs...)
}
