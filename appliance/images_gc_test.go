package appliance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/wire"
)

// `image rm` frees the disk on every node: a blob no image names is removed
// once it is older than bootfiles.BlobGrace, while a fresh upload that no
// image names yet (files are PUT before the POST that names them) stays.
func TestImageRemoveFreesBlobs(t *testing.T) {
	nodes, token := startCluster(t, 2)
	kf := upload(t, nodes[0].Node, token, "old", "kernel", bytes.Repeat([]byte("old-kernel-"), 1000))
	inf := upload(t, nodes[0].Node, token, "old", "initrd", bytes.Repeat([]byte("old-initrd-"), 1000))
	body, _ := json.Marshal(wire.ImageRequest{Name: "old", Files: []wire.ImageFile{kf, inf}})
	var answer []byte
	if code := call(t, nodes[0].Node, token, http.MethodPost, "/api/v1/images", string(body), &answer); code != http.StatusCreated {
		t.Fatalf("post image: %d %s", code, answer)
	}
	waitFor(t, "the second node to fetch the blobs", func() bool {
		return nodes[1].blobs.Have(storeImageFile(kf)) && nodes[1].blobs.Have(storeImageFile(inf))
	})
	pending := upload(t, nodes[0].Node, token, "next", "kernel", bytes.Repeat([]byte("next-kernel-"), 1000))

	// Both blobs look old; only the named one may survive while named.
	old := time.Now().Add(-2 * bootfiles.BlobGrace)
	for _, n := range nodes {
		for _, f := range []wire.ImageFile{kf, inf, pending} {
			os.Chtimes(n.blobs.Path(f.SHA256), old, old)
		}
	}
	os.Chtimes(nodes[0].blobs.Path(pending.SHA256), time.Now(), time.Now())
	nodes[0].boot.WakeSync()
	if code := call(t, nodes[0].Node, token, http.MethodDelete, "/api/v1/images/old", "", nil); code != http.StatusOK {
		t.Fatalf("delete image: %d", code)
	}
	for _, n := range nodes {
		waitFor(t, n.Name()+" to remove the blob of the deleted image", func() bool {
			n.boot.WakeSync()
			_, err1 := os.Stat(n.blobs.Path(kf.SHA256))
			_, err2 := os.Stat(n.blobs.Path(inf.SHA256))
			return os.IsNotExist(err1) && os.IsNotExist(err2)
		})
	}
	if !nodes[0].blobs.Have(storeImageFile(pending)) {
		t.Error("a fresh upload no image names yet was removed")
	}
	entries, _ := os.ReadDir(filepath.Dir(nodes[0].blobs.Path(pending.SHA256)))
	if len(entries) != 1 {
		t.Errorf("blob directory holds %d entries, want the pending upload only", len(entries))
	}
}
