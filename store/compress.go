package store

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
)

// Inventory documents are ~50 KB of JSON that compress about fivefold. The
// proposer compresses a document once (CompressDocument); the Raft log,
// replication and every node's store then carry the small form, and readers
// get the JSON back from Inventory. A stored value is either plain JSON (it
// starts with '{') or docMagic followed by a raw DEFLATE stream.
var docMagic = []byte{0, 'z', '1'}

// maxDocument bounds a decompressed document (the API accepts 8 MiB).
const maxDocument = 16 << 20

// CompressDocument returns doc in the stored compressed form.
func CompressDocument(doc []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(doc)/4 + len(docMagic))
	buf.Write(docMagic)
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(doc); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ExpandDocument returns the JSON of a stored document, compressed or not.
func ExpandDocument(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, docMagic) {
		return append([]byte(nil), b...), nil
	}
	r := flate.NewReader(bytes.NewReader(b[len(docMagic):]))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, fmt.Errorf("expand document: %w", err)
	}
	if len(out) > maxDocument {
		return nil, fmt.Errorf("expand document: larger than %d bytes", maxDocument)
	}
	return out, nil
}
