package store

import (
	"regexp"
	"time"
)

// Boot images: a named set of files (kernel, initrd, optionally a squashfs)
// with their sizes and SHA-256. The bytes live in each node's data
// directory; the record says what they must be and which nodes hold a
// verified copy.

var bucketImages = []byte("images")

// TableImages names the image table for blocking queries.
const TableImages = "images"

// ImageFile is one file of an image.
type ImageFile struct {
	Name   string `json:"name"` // kernel, initrd, squashfs
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Image is a boot image.
type Image struct {
	Name    string      `json:"name"`
	Files   []ImageFile `json:"files"`
	Nodes   []string    `json:"nodes"` // nodes holding a verified copy
	Created time.Time   `json:"created"`
	Index   uint64      `json:"index"`
}

// File returns the named file of the image.
func (im Image) File(name string) (ImageFile, bool) {
	for _, f := range im.Files {
		if f.Name == name {
			return f, true
		}
	}
	return ImageFile{}, false
}

// ImageFileNames are the files an image may have.
var ImageFileNames = []string{"kernel", "initrd", "squashfs"}

var imageNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// ValidImageName checks an image name: it becomes a directory and a URL
// segment, so it is a lowercase label.
func ValidImageName(s string) error {
	if !imageNamePattern.MatchString(s) || s == "." || s == ".." {
		return Errorf(ErrInvalid, "image name %q must be lowercase letters, digits, '.', '_' or '-' (1 to 63, not starting with a dot)", s)
	}
	return nil
}

// Image returns one image.
func (t *Tx) Image(name string) (Image, error) {
	var im Image
	if err := t.getJSON(bucketImages, name, &im); err != nil {
		return im, lookupError(err, "image %q", name)
	}
	return im, nil
}

// Images lists images by name.
func (t *Tx) Images() ([]Image, error) {
	var out []Image
	err := forEachJSON(t, bucketImages, "", func(_ string, im *Image) error {
		out = append(out, *im)
		return nil
	})
	return out, err
}

// PutImage writes an image record.
func (t *Tx) PutImage(im Image) error {
	im.Index = t.Index
	if err := t.putJSON(bucketImages, im.Name, im); err != nil {
		return err
	}
	if err := t.logChange("images", im.Name, OpPut); err != nil {
		return err
	}
	return t.touch(TableImages)
}

// DeleteImage removes an image record.
func (t *Tx) DeleteImage(name string) error {
	if _, err := t.Image(name); err != nil {
		return err
	}
	if err := t.del(bucketImages, name); err != nil {
		return err
	}
	if err := t.logChange("images", name, OpDelete); err != nil {
		return err
	}
	return t.touch(TableImages)
}
