package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// Image files are kept content-addressed in DATA/images/blobs/<sha256>: a
// re-import under the same name never changes a file another node is
// fetching, and "do I have it" is "does the blob exist". Other nodes fetch
// missing blobs from a node that holds them over the cluster's mutual TLS and
// verify the SHA-256 before the file can be served.

const (
	dirImages      = "images"
	maxImageBytes  = 8 << 30
	imageSyncEvery = 30 * time.Second
)

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (n *Node) blobPath(sum string) string { return n.path(dirImages, "blobs", sum) }

func (n *Node) haveBlob(f store.ImageFile) bool {
	st, err := os.Stat(n.blobPath(f.SHA256))
	return err == nil && st.Mode().IsRegular() && st.Size() == f.Size
}

// writeBlob streams r into the blob store, hashing as it goes, and returns
// the SHA-256 and size. want, when set, must match or nothing is kept.
func (n *Node) writeBlob(r io.Reader, want string) (string, int64, error) {
	dir := n.path(dirImages, "blobs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(dir, ".incoming-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, maxImageBytes+1))
	if err == nil && size > maxImageBytes {
		err = fmt.Errorf("image file larger than %d GiB", maxImageBytes>>30)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want != "" && sum != want {
		return "", 0, fmt.Errorf("checksum mismatch: got %s, want %s", sum, want)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", 0, err
	}
	return sum, size, os.Rename(tmp.Name(), n.blobPath(sum))
}

// putImageFile is PUT /api/v1/images/:name/files/:file: the body is the
// file. It lands in the blob store; the image exists once POST
// /api/v1/images names its files.
func (n *Node) putImageFile(c *gin.Context) {
	if err := store.ValidImageName(c.Param("name")); err != nil {
		n.fail(c, err)
		return
	}
	if !slices.Contains(store.ImageFileNames, c.Param("file")) {
		n.fail(c, badRequest("file must be one of %s", strings.Join(store.ImageFileNames, ", ")))
		return
	}
	sum, size, err := n.writeBlob(c.Request.Body, "")
	if err != nil {
		n.fail(c, badRequest("upload failed: %v", err))
		return
	}
	c.JSON(http.StatusOK, wire.ImageFile{Name: c.Param("file"), Size: size, SHA256: sum})
}

func (n *Node) postImage(c *gin.Context) {
	var req wire.ImageRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		n.fail(c, err)
		return
	}
	for _, f := range req.Files {
		if !sha256Pattern.MatchString(f.SHA256) {
			n.fail(c, badRequest("file %s: sha256 must be 64 lowercase hex digits", f.Name))
			return
		}
		if !n.haveBlob(storeImageFile(f)) {
			n.fail(c, badRequest("file %s (%s) was not uploaded to this node: PUT /api/v1/images/%s/files/%s first", f.Name, f.SHA256[:12], req.Name, f.Name))
			return
		}
	}
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.ImagePut{Image: store.Image{
		Name: req.Name, Files: convert(req.Files, storeImageFile), Nodes: []string{n.opts.Name}, Created: time.Now().UTC(),
	}})
	if err != nil {
		n.fail(c, err)
		return
	}
	n.wakeImageSync()
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	n.respondImage(c, http.StatusCreated, req.Name)
}

func (n *Node) respondImage(c *gin.Context, status int, name string) {
	var im store.Image
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		im, err = tx.Image(name)
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.JSON(status, wireImage(im))
}

func (n *Node) listImages(c *gin.Context) {
	if err := n.blockingQuery(c, store.TableImages); err != nil {
		n.fail(c, err)
		return
	}
	var out wire.ImageList
	if err := n.db.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableImages)
		images, err := tx.Images()
		out.Images = nonNil(convert(images, wireImage))
		return err
	}); err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(out.Index, 10))
	c.JSON(http.StatusOK, out)
}

func (n *Node) getImage(c *gin.Context) { n.respondImage(c, http.StatusOK, c.Param("name")) }

func (n *Node) deleteImage(c *gin.Context) {
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.ImageDelete{Name: c.Param("name")})
	if err != nil {
		n.fail(c, err)
		return
	}
	c.Header(headerIndex, strconv.FormatUint(idx, 10))
	c.JSON(http.StatusOK, wire.Deleted{Deleted: c.Param("name")})
}

// serveImageFile is GET/HEAD /images/:name/:file, unauthenticated (machines
// fetch kernels before they hold any credential). Only files named by an
// image record are served, from the blob the record names: no request path
// ever reaches the file system.
func (n *Node) serveImageFile(c *gin.Context) {
	var f store.ImageFile
	err := n.db.View(func(tx *store.Tx) error {
		im, err := tx.Image(c.Param("name"))
		if err != nil {
			return err
		}
		var ok bool
		if f, ok = im.File(c.Param("file")); !ok {
			return fmt.Errorf("image %s has no %s: %w", im.Name, c.Param("file"), store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		n.bootRefused.Inc()
		n.fail(c, err)
		return
	}
	file, err := os.Open(n.blobPath(f.SHA256))
	if err != nil {
		c.Header("Retry-After", "10")
		n.fail(c, &apiError{Status: http.StatusServiceUnavailable, Code: "syncing", Message: "this node has not fetched that image file yet; retry shortly"})
		return
	}
	defer file.Close()
	c.Header("Cache-Control", "no-cache")
	c.Header("ETag", `"`+f.SHA256+`"`)
	// ServeContent handles HEAD, Range, If-Range and Content-Length (RFC
	// 9110); the response writer sends an *os.File with sendfile.
	http.ServeContent(sendfileWriter{c.Writer}, c.Request, "", time.Time{}, file)
}

// sendfileWriter gives gin's response writer, which has no io.ReaderFrom,
// the one of the http.ResponseWriter underneath, so that ServeContent's copy
// of an *os.File is a sendfile instead of 32 KiB reads and writes.
type sendfileWriter struct{ gin.ResponseWriter }

func (w sendfileWriter) ReadFrom(r io.Reader) (int64, error) {
	w.WriteHeaderNow()
	if u, ok := w.ResponseWriter.(interface{ Unwrap() http.ResponseWriter }); ok {
		if rf, ok := u.Unwrap().(io.ReaderFrom); ok {
			return rf.ReadFrom(r)
		}
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

// serveBlob is GET /v1/blobs/{sha} on the cluster port (mutual TLS).
func (n *Node) serveBlob(w http.ResponseWriter, r *http.Request) {
	sum := r.PathValue("sha")
	if !sha256Pattern.MatchString(sum) {
		http.Error(w, "not a sha256", http.StatusBadRequest)
		return
	}
	f, err := os.Open(n.blobPath(sum))
	if err != nil {
		http.Error(w, "no such blob here", http.StatusNotFound)
		return
	}
	defer f.Close()
	http.ServeContent(w, r, "", time.Time{}, f)
}

func (n *Node) wakeImageSync() { notifyOnce(n.imageSync) }

// syncImages keeps this node's blob store complete: whenever images change
// (and every imageSyncEvery), it fetches missing files from nodes that hold
// them, verifies them, and tells the cluster it holds them.
func (n *Node) syncImages(ctx context.Context) {
	// The loop wakes when images or the members change; blobs are
	// garbage-collected only when the set of named files changed or a sync
	// period passed, not on every wake-up.
	var gcRefs string
	var gcAt time.Time
	n.db.Follow(ctx, []string{store.TableImages, store.TableCluster}, imageSyncEvery, n.imageSync, func(ctx context.Context) error {
		refs, err := n.syncImagesOnce(ctx)
		if err != nil && ctx.Err() == nil {
			n.log.Warn("image sync incomplete; will retry", "err", err)
		}
		if key := strings.Join(slices.Sorted(maps.Keys(refs)), ","); refs != nil && (key != gcRefs || time.Since(gcAt) >= imageSyncEvery) {
			n.gcBlobs(refs, time.Now())
			gcRefs, gcAt = key, time.Now()
		}
		return nil
	})
}

// syncImagesOnce fetches what this node lacks; it returns the blobs images
// name.
func (n *Node) syncImagesOnce(ctx context.Context) (map[string]bool, error) {
	var images []store.Image
	nodes := map[string]string{}
	if err := n.db.View(func(tx *store.Tx) error {
		var err error
		if images, err = tx.Images(); err != nil {
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
			if n.haveBlob(f) {
				continue
			}
			if err := n.fetchBlob(ctx, f, im.Nodes, nodes); err != nil {
				errs = append(errs, fmt.Errorf("image %s file %s: %w", im.Name, f.Name, err))
				complete = false
			}
		}
		if complete && !slices.Contains(im.Nodes, n.opts.Name) {
			if _, err := n.cluster.Apply(ctx, &raftfsm.ImageHave{Name: im.Name, Node: n.opts.Name, Files: im.Files, Now: time.Now().UTC()}); err != nil && !errors.Is(err, store.ErrConflict) {
				errs = append(errs, err)
			} else if err == nil {
				n.log.Info("image synced", "image", im.Name)
			}
		}
	}
	return referenced, errors.Join(errs...)
}

// blobGrace is how long a blob no image names is kept: files are uploaded
// one by one before the POST that names them, and a re-upload restarts it.
const blobGrace = time.Hour

// gcBlobs removes blobs (and abandoned partial uploads) that no image names
// and that were last written more than blobGrace before now: `image rm`
// frees the disk on every node.
func (n *Node) gcBlobs(referenced map[string]bool, now time.Time) {
	dir := n.path(dirImages, "blobs")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // no blobs yet
	}
	for _, e := range entries {
		name := e.Name()
		if referenced[name] || !(sha256Pattern.MatchString(name) || strings.HasPrefix(name, ".incoming-")) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || now.Sub(info.ModTime()) < blobGrace {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			n.log.Warn("image blob not removed", "blob", name, "err", err)
			continue
		}
		n.log.Info("image blob removed: no image names it", "blob", name, "bytes", info.Size())
	}
}

// fetchBlob tries each holder in turn; a copy whose checksum does not match
// is refused and the next holder is asked.
func (n *Node) fetchBlob(ctx context.Context, f store.ImageFile, holders []string, addrs map[string]string) error {
	var errs []error
	for _, h := range holders {
		if h == n.opts.Name || addrs[h] == "" {
			continue
		}
		err := n.cluster.Stream(ctx, addrs[h], "/v1/blobs/"+f.SHA256, func(r io.Reader) error {
			_, _, err := n.writeBlob(r, f.SHA256)
			return err
		})
		if err == nil {
			n.imageFetched.Inc()
			return nil
		}
		n.imageRefused.Inc()
		n.log.Warn("image file fetch failed", "from", h, "sha256", f.SHA256[:12], "err", err)
		errs = append(errs, fmt.Errorf("from %s: %w", h, err))
	}
	if len(errs) == 0 {
		return errors.New("no other node holds it yet")
	}
	return errors.Join(errs...)
}
