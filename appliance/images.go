package appliance

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rollcall/rollcall/appliance/bootfiles"
	"github.com/rollcall/rollcall/appliance/wire"
	"github.com/rollcall/rollcall/raftfsm"
	"github.com/rollcall/rollcall/store"
)

// The operator's image API: files are uploaded into this node's blob store
// (bootfiles.Blobs), then an image record names them; image sync
// (bootfiles.Server.Run) brings them to every other node.

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
	sum, size, err := n.blobs.Write(c.Request.Body, "")
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
		if !bootfiles.ValidSHA256(f.SHA256) {
			n.fail(c, badRequest("file %s: sha256 must be 64 lowercase hex digits", f.Name))
			return
		}
		if !n.blobs.Have(storeImageFile(f)) {
			n.fail(c, badRequest("file %s (%s) was not uploaded to this node: PUT /api/v1/images/%s/files/%s first", f.Name, f.SHA256[:12], req.Name, f.Name))
			return
		}
	}
	idx, err := n.cluster.Apply(c.Request.Context(), &raftfsm.ImagePut{Image: raftfsm.Image{
		Name: req.Name, Files: raftfsm.ImageFilesBody(convert(req.Files, storeImageFile)), Nodes: []string{n.opts.Name}, Created: time.Now().UTC(),
	}})
	if err != nil {
		n.fail(c, err)
		return
	}
	n.boot.WakeSync()
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
