//go:build !unix

package store

import (
	"fmt"
	"os"
	"time"
)

// lockFile opens the store file; bbolt takes the lock itself here (after
// checkFile has read the file unlocked), and a held lock surfaces as its
// timeout, reported by openBolt without a PID.
func lockFile(path string, _ time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return f, nil
}

func processName(int) string { return "" }
