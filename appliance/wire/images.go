package wire

import "time"

// ImageFile is one file of a boot image; PUT
// /api/v1/images/{name}/files/{file} answers with it once the upload is
// stored.
type ImageFile struct {
	Name   string `json:"name"` // kernel, initrd, squashfs
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // 64 lowercase hex digits
}

// Image is a boot image.
type Image struct {
	Name    string      `json:"name"`
	Files   []ImageFile `json:"files"`
	Nodes   []string    `json:"nodes"` // the nodes holding a verified copy
	Created time.Time   `json:"created"`
	Index   uint64      `json:"index"`
}

// ImageRequest is POST /api/v1/images: it names files already uploaded to
// the node it is sent to.
type ImageRequest struct {
	Name  string      `json:"name"`
	Files []ImageFile `json:"files"`
}

// ImageList is GET /api/v1/images.
type ImageList struct {
	Index  uint64  `json:"index"` // the images table's change index
	Images []Image `json:"images"`
}
