package node_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/nodetest"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/store"
)

// `image rm` frees the disk on every node: a blob no image names is removed
// once it is older than bootfiles.BlobGrace, while a fresh upload that no
// image names yet (files are PUT before the POST that names them) stays.
func TestImageRemoveFreesBlobs(t *testing.T) {
	nodes := nodetest.StartCluster(t, 2, nodetest.Options{})
	token := nodes[0].Admin
	kf := nodes[0].Upload(t, token, "old", "kernel", bytes.Repeat([]byte("old-kernel-"), 1000))
	inf := nodes[0].Upload(t, token, "old", "initrd", bytes.Repeat([]byte("old-initrd-"), 1000))
	body, _ := json.Marshal(wire.ImageRequest{Name: "old", Files: []wire.ImageFile{kf, inf}})
	var answer []byte
	if code := nodes[0].Call(t, token, http.MethodPost, "/api/v1/images", string(body), &answer); code != http.StatusCreated {
		t.Fatalf("post image: %d %s", code, answer)
	}
	nodetest.WaitFor(t, "the second node to fetch the blobs", func() bool {
		return nodes[1].Blobs().Have(store.ImageFile{Name: kf.Name, Size: kf.Size, SHA256: kf.SHA256}) && nodes[1].Blobs().Have(store.ImageFile{Name: inf.Name, Size: inf.Size, SHA256: inf.SHA256})
	})
	pending := nodes[0].Upload(t, token, "next", "kernel", bytes.Repeat([]byte("next-kernel-"), 1000))

	// Both blobs look old; only the named one may survive while named.
	old := time.Now().Add(-2 * bootfiles.BlobGrace)
	for _, n := range nodes {
		for _, f := range []wire.ImageFile{kf, inf, pending} {
			os.Chtimes(n.Blobs().Path(f.SHA256), old, old)
		}
	}
	os.Chtimes(nodes[0].Blobs().Path(pending.SHA256), time.Now(), time.Now())
	nodes[0].BootFiles().WakeSync()
	if code := nodes[0].Call(t, token, http.MethodDelete, "/api/v1/images/old", "", nil); code != http.StatusOK {
		t.Fatalf("delete image: %d", code)
	}
	for _, n := range nodes {
		nodetest.WaitFor(t, n.Name()+" to remove the blob of the deleted image", func() bool {
			n.BootFiles().WakeSync()
			_, err1 := os.Stat(n.Blobs().Path(kf.SHA256))
			_, err2 := os.Stat(n.Blobs().Path(inf.SHA256))
			return os.IsNotExist(err1) && os.IsNotExist(err2)
		})
	}
	if !nodes[0].Blobs().Have(store.ImageFile{Name: pending.Name, Size: pending.Size, SHA256: pending.SHA256}) {
		t.Error("a fresh upload no image names yet was removed")
	}
	entries, _ := os.ReadDir(filepath.Dir(nodes[0].Blobs().Path(pending.SHA256)))
	if len(entries) != 1 {
		t.Errorf("blob directory holds %d entries, want the pending upload only", len(entries))
	}
}
