package oscatalog

import (
	"io"
	"time"
)

// Progress is one report of a long step: download, verify, inspect,
// convert, compress, record, replicate. Bytes of Total (0: unknown); for
// replicate, nodes holding the version of the cluster's nodes.
type Progress struct {
	Name    string `json:"name,omitempty"` // the catalog name
	Step    string `json:"step"`
	State   string `json:"state,omitempty"` // running, done, failed, skipped
	Bytes   int64  `json:"bytes,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// progressEvery is how often a running step reports.
const progressEvery = time.Second

// copyProgress copies src to dst, reporting step's progress at most every
// progressEvery, and once more at the end.
func copyProgress(dst io.Writer, src io.Reader, step string, total int64, progress func(Progress)) (int64, error) {
	if progress == nil {
		return io.Copy(dst, src)
	}
	progress(Progress{Step: step, State: "running", Total: total})
	buf := make([]byte, 1<<20)
	var n int64
	last := time.Now()
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
			if time.Since(last) >= progressEvery {
				last = time.Now()
				progress(Progress{Step: step, State: "running", Bytes: n, Total: total})
			}
		}
		if rerr == io.EOF {
			progress(Progress{Step: step, State: "done", Bytes: n, Total: total})
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
