package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
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
func (s *Server) putImageFile(c *gin.Context) error {
	if err := store.ValidImageName(c.Param("name")); err != nil {
		return err
	}
	if !slices.Contains(store.ImageFileNames, c.Param("file")) {
		return BadRequest("file must be one of %s", strings.Join(store.ImageFileNames, ", "))
	}
	sum, size, err := s.cfg.Blobs.Write(c.Request.Body, "")
	if err != nil {
		if errors.Is(err, bootfiles.ErrTooLarge) {
			return Wrap(http.StatusBadRequest, "bad_request", fmt.Sprintf("upload failed: image file larger than %d GiB", bootfiles.MaxImageBytes>>30), err)
		}
		// The body ended early, or the disk refused it: the log says which.
		return Wrap(http.StatusBadRequest, "bad_request", "upload failed: the file could not be received and stored (the node's log says why)", err)
	}
	c.JSON(http.StatusOK, wire.ImageFile{Name: c.Param("file"), Size: size, SHA256: sum})
	return nil
}

func (s *Server) postImage(c *gin.Context) error {
	var req wire.ImageRequest
	if err := decodeBody(c, maxBodyBytes, &req); err != nil {
		return err
	}
	for _, f := range req.Files {
		if !bootfiles.ValidSHA256(f.SHA256) {
			return BadRequest("file %s: sha256 must be 64 lowercase hex digits", f.Name)
		}
		if !s.cfg.Blobs.Have(storeImageFile(f)) {
			return BadRequest("file %s (%s) was not uploaded to this node: PUT /api/v1/images/%s/files/%s first", f.Name, f.SHA256[:12], req.Name, f.Name)
		}
	}
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.ImagePut{Image: raftfsm.Image{
		Name: req.Name, Files: raftfsm.ImageFilesBody(convert(req.Files, storeImageFile)), Nodes: []string{s.cfg.Name}, Created: time.Now().UTC(),
	}})
	if err != nil {
		return err
	}
	s.cfg.Boot.WakeSync()
	setIndex(c, idx)
	return s.respondImage(c, http.StatusCreated, req.Name)
}

func (s *Server) respondImage(c *gin.Context, status int, name string) error {
	var im store.Image
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		var err error
		im, err = tx.Image(name)
		return err
	}); err != nil {
		return err
	}
	c.JSON(status, wireImage(im))
	return nil
}

func (s *Server) listImages(c *gin.Context) error {
	if err := s.blockingQuery(c, store.TableImages); err != nil {
		return err
	}
	var out wire.ImageList
	if err := s.cfg.DB.View(func(tx *store.Tx) error {
		out.Index = tx.TableIndex(store.TableImages)
		images, err := tx.Images()
		out.Images = nonNil(convert(images, wireImage))
		return err
	}); err != nil {
		return err
	}
	setIndex(c, out.Index)
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getImage(c *gin.Context) error {
	return s.respondImage(c, http.StatusOK, c.Param("name"))
}

func (s *Server) deleteImage(c *gin.Context) error {
	idx, err := s.cfg.Cluster.Apply(c.Request.Context(), &raftfsm.ImageDelete{Name: c.Param("name")})
	if err != nil {
		return err
	}
	setIndex(c, idx)
	c.JSON(http.StatusOK, wire.Deleted{Deleted: c.Param("name")})
	return nil
}
