package bootfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rollcall/rollcall/store"
)

// Image files are kept content-addressed in DATA/images/blobs/<sha256>: a
// re-import under the same name never changes a file another node is
// fetching, and "do I have it" is "does the blob exist". Other nodes fetch
// missing blobs from a node that holds them over the cluster's mutual TLS and
// verify the SHA-256 before the file can be served.

// MaxImageBytes bounds one image file.
const MaxImageBytes = 8 << 30

// ErrTooLarge is a file past the size an image file may have.
var ErrTooLarge = fmt.Errorf("image file larger than %d GiB", MaxImageBytes>>30)

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidSHA256 reports whether sum is a SHA-256 as blobs are named: 64
// lowercase hex digits. Only such a name is ever joined to the blob
// directory.
func ValidSHA256(sum string) bool { return sha256Pattern.MatchString(sum) }

// Blobs is the blob store of one node. It keeps no state of its own beyond
// the directory, so the node opens it before anything else runs (the
// cluster port serves it from its first request).
type Blobs struct{ dir string }

// OpenBlobs is the blob store under the data directory dataDir.
func OpenBlobs(dataDir string) *Blobs {
	return &Blobs{dir: filepath.Join(dataDir, "images", "blobs")}
}

// Path is where the blob with SHA-256 sum is kept; sum must be valid.
func (b *Blobs) Path(sum string) string { return filepath.Join(b.dir, sum) }

// Have reports whether the file f names is here, whole.
func (b *Blobs) Have(f store.ImageFile) bool {
	st, err := os.Stat(b.Path(f.SHA256))
	return err == nil && st.Mode().IsRegular() && st.Size() == f.Size
}

// Write streams r into the blob store, hashing as it goes, and returns the
// SHA-256 and size. want, when set, must match or nothing is kept.
func (b *Blobs) Write(r io.Reader, want string) (string, int64, error) {
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(b.dir, ".incoming-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, MaxImageBytes+1))
	if err == nil && size > MaxImageBytes {
		err = ErrTooLarge
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
	return sum, size, os.Rename(tmp.Name(), b.Path(sum))
}

// ServeHTTP is GET /v1/blobs/{sha} on the cluster port (mutual TLS): how
// other nodes fetch the blobs they lack.
func (b *Blobs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sum := r.PathValue("sha")
	if !ValidSHA256(sum) {
		http.Error(w, "not a sha256", http.StatusBadRequest)
		return
	}
	f, err := os.Open(b.Path(sum))
	if err != nil {
		http.Error(w, "no such blob here", http.StatusNotFound)
		return
	}
	defer f.Close()
	http.ServeContent(w, r, "", time.Time{}, f)
}

// BlobGrace is how long a blob no image names is kept: files are uploaded
// one by one before the POST that names them, and a re-upload restarts it.
const BlobGrace = time.Hour

// gc removes blobs (and abandoned partial uploads) that no image names and
// that were last written more than BlobGrace before now: `image rm` frees
// the disk on every node.
func (b *Blobs) gc(referenced map[string]bool, now time.Time, log *slog.Logger) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return // no blobs yet
	}
	for _, e := range entries {
		name := e.Name()
		if referenced[name] || !(ValidSHA256(name) || strings.HasPrefix(name, ".incoming-")) {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || now.Sub(info.ModTime()) < BlobGrace {
			continue
		}
		if err := os.Remove(filepath.Join(b.dir, name)); err != nil {
			log.Warn("image blob not removed", "blob", name, "err", err)
			continue
		}
		log.Info("image blob removed: no image names it", "blob", name, "bytes", info.Size())
	}
}
