package bootfiles

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// readFromRecorder is a response writer with the io.ReaderFrom that
// net/http's own has (it is what sends an *os.File with sendfile).
type readFromRecorder struct {
	*httptest.ResponseRecorder
	readFrom     int
	statusAtCopy int
}

func (w *readFromRecorder) ReadFrom(r io.Reader) (int64, error) {
	w.readFrom++
	w.statusAtCopy = w.Code
	return io.Copy(w.ResponseRecorder, r)
}

// ServeContent's copy goes round gin's response writer, which has no
// ReadFrom, to the one underneath, with the status gin held back sent
// first; a writer without either is copied to as before.
func TestSendfileWriter(t *testing.T) {
	rec := &readFromRecorder{ResponseRecorder: httptest.NewRecorder()}
	c, _ := gin.CreateTestContext(rec)
	c.Writer.WriteHeader(http.StatusPartialContent)
	if n, err := (sendfileWriter{c.Writer}).ReadFrom(strings.NewReader("kernel")); err != nil || n != 6 {
		t.Fatalf("ReadFrom: %d, %v", n, err)
	}
	if rec.readFrom != 1 || rec.statusAtCopy != http.StatusPartialContent || rec.Body.String() != "kernel" {
		t.Errorf("through gin: ReadFrom called %d times, status %d at the copy, body %q", rec.readFrom, rec.statusAtCopy, rec.Body)
	}

	plain := httptest.NewRecorder()
	if n, err := (sendfileWriter{plain}).ReadFrom(strings.NewReader("initrd")); err != nil || n != 6 || plain.Body.String() != "initrd" {
		t.Errorf("plain writer: %d, %v, body %q", n, err, plain.Body)
	}
}
