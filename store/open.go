package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged marks a store file that failed a check at open: its structure
// (checkFile, bbolt's tx.Check) or its content against the hash recorded
// when it was last closed. The node must not serve from it.
var ErrDamaged = errors.New("store file is damaged")

// ErrInUse marks a store file another open holds (bbolt's exclusive flock):
// a second node process on the same data directory, or a tool.
var ErrInUse = errors.New("store file is in use")

// damagedError names the file, the damage and the way out.
type damagedError struct {
	path  string
	cause error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("open store %s: the file is corrupt: %v; this node's copy of the state cannot be trusted: "+
		"stop the node, move %s aside and start the node again to rebuild it from Raft (the cluster's snapshot and log), "+
		"or restore it from a backup", e.path, e.cause, filepath.Base(e.path))
}

func (e *damagedError) Unwrap() []error { return []error{ErrDamaged, e.cause} }

func damaged(path string, cause error) error { return &damagedError{path: path, cause: cause} }

// inUseError names the process holding the file's lock, when it was found
// (pid 0: not found).
type inUseError struct {
	path string
	pid  int
}

func (e *inUseError) Error() string {
	who := "another process"
	switch {
	case e.pid == os.Getpid():
		who = fmt.Sprintf("process %d (this process, which has it open already)", e.pid)
	case e.pid > 0:
		who = fmt.Sprintf("process %d", e.pid)
		if comm := processName(e.pid); comm != "" {
			who += " (" + comm + ")"
		}
	}
	return fmt.Sprintf("open store %s: in use by %s, which holds its lock: stop that process, or give this one another data directory", e.path, who)
}

func (e *inUseError) Unwrap() error { return ErrInUse }

func inUse(path string, pid int) error { return &inUseError{path: path, pid: pid} }

// openBolt opens a bbolt file. With check, it first walks the file
// (checkFile) while holding its lock, then runs bbolt's consistency check;
// without, it trusts the file (Restore reopening the file it just checked).
func openBolt(path string, check bool) (db *bolt.DB, err error) {
	f, err := lockFile(path, boltOptions().Timeout)
	if err != nil {
		return nil, err
	}
	if check {
		if err := checkOpenFile(f); err != nil {
			f.Close()
			return nil, damaged(path, err)
		}
	}
	// checkFile leaves bbolt nothing to fault on or panic about; this is for
	// what it did not foresee. A fault in bbolt's mapping becomes a panic
	// only in this goroutine, and a panic here leaves bbolt's state
	// unknown: give up the file (and with it the lock) without bbolt's
	// Close, which could wait on a lock the panic left taken.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f.Close()
			db, err = nil, damaged(path, fmt.Errorf("bbolt failed on it: %v", r))
		}
	}()
	opts := boltOptions()
	// bbolt is handed the file lockFile locked; its own flock on the same
	// open file succeeds at once.
	opts.OpenFile = func(string, int, os.FileMode) (*os.File, error) { return f, nil }
	db, err = bolt.Open(path, 0o600, opts)
	if err != nil {
		f.Close() // bbolt closed it on most paths: closing again is harmless
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, inUse(path, 0)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return nil, damaged(path, err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if check {
		if err := boltCheck(db); err != nil {
			db.Close()
			return nil, damaged(path, err)
		}
	}
	return db, nil
}

func checkOpenFile(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return checkFile(f, st.Size())
}

// boltCheck runs bbolt's tx.Check to the end: its goroutine reads pages
// through the transaction, so the transaction must outlive it.
func boltCheck(db *bolt.DB) error {
	var first []string
	n := 0
	err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			if n++; len(first) < 3 {
				first = append(first, err.Error())
			}
		}
		return nil
	})
	if err != nil || n == 0 {
		return err
	}
	msg := strings.Join(first, "; ")
	if n > len(first) {
		msg += fmt.Sprintf("; and %d more", n-len(first))
	}
	return fmt.Errorf("bbolt check: %s", msg)
}
