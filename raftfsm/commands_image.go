package raftfsm

import (
	"encoding/hex"
	"slices"
	"time"

	"github.com/rollcall/rollcall/store"
)

// ImagePut records a new image (or a new version under the same name) held by
// the node that imported it. Other nodes fetch and verify the files, then
// announce them with ImageHave.
type ImagePut struct {
	Image Image `json:"image"`
}

// ImageDelete forgets an image.
type ImageDelete struct {
	Name string `json:"name"`
}

// ImageHave says a node holds verified copies of an image's files, as they
// were when the image had this content (Files must match the record).
type ImageHave struct {
	Name  string      `json:"name"`
	Node  string      `json:"node"`
	Files []ImageFile `json:"files"`
	Now   time.Time   `json:"now"`
}

func (*ImagePut) Type() Type                    { return TypeImagePut }
func (*ImageDelete) Type() Type                 { return TypeImageDelete }
func (*ImageHave) Type() Type                   { return TypeImageHave }
func (*ImagePut) Version() uint8                { return 1 }
func (*ImageDelete) Version() uint8             { return 1 }
func (*ImageHave) Version() uint8               { return 1 }
func (c *ImageDelete) apply(tx *store.Tx) error { return tx.DeleteImage(c.Name) }

func (c *ImagePut) apply(tx *store.Tx) error {
	im := c.Image.record()
	if err := store.ValidImageName(im.Name); err != nil {
		return err
	}
	if _, ok := im.File("kernel"); !ok {
		return store.Errorf(store.ErrInvalid, "image %s needs a kernel", im.Name)
	}
	if _, ok := im.File("initrd"); !ok {
		return store.Errorf(store.ErrInvalid, "image %s needs an initrd", im.Name)
	}
	seen := map[string]bool{}
	for _, f := range im.Files {
		if !slices.Contains(store.ImageFileNames, f.Name) || seen[f.Name] {
			return store.Errorf(store.ErrInvalid, "image %s: file %q is not one of kernel, initrd, squashfs (once each)", im.Name, f.Name)
		}
		seen[f.Name] = true
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 || f.Size < 0 {
			return store.Errorf(store.ErrInvalid, "image %s: file %s needs a size and a SHA-256", im.Name, f.Name)
		}
	}
	if len(im.Nodes) != 1 {
		return store.Errorf(store.ErrInvalid, "image %s: an import names the one node that holds it", im.Name)
	}
	return tx.PutImage(im)
}

func (c *ImageHave) apply(tx *store.Tx) error {
	im, err := tx.Image(c.Name)
	if err != nil {
		return err
	}
	if !slices.Equal(im.Files, records(c.Files)) {
		return store.Errorf(store.ErrConflict, "image %s changed since %s verified it", c.Name, c.Node)
	}
	if slices.Contains(im.Nodes, c.Node) {
		return nil
	}
	im.Nodes = append(im.Nodes, c.Node)
	slices.Sort(im.Nodes)
	return tx.PutImage(im)
}

func imageCommands() map[Type]commandInfo {
	return map[Type]commandInfo{
		TypeImagePut:    {"image-put", 1, func() Command { return &ImagePut{} }},
		TypeImageDelete: {"image-delete", 1, func() Command { return &ImageDelete{} }},
		TypeImageHave:   {"image-have", 1, func() Command { return &ImageHave{} }},
	}
}
