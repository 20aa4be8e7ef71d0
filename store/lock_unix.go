//go:build unix

package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile opens the store file and takes the lock bbolt would take (an
// exclusive flock), waiting up to wait for it. Taking it here rather than
// in bbolt lets a file held elsewhere be reported with the holder's PID
// instead of bbolt's "timeout", and keeps the file locked while checkFile
// reads it. flock belongs to the open file description: a second open in
// the same process conflicts too.
func lockFile(path string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("open store %s: lock: %w", path, err)
		case time.Now().After(deadline):
			pid := lockHolder(f)
			f.Close()
			return nil, inUse(path, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lockHolder finds the PID holding a lock on f's inode in /proc/locks
// (Linux), or 0. Lines look like "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF";
// waiters are listed with "->" and skipped.
func lockHolder(f *os.File) int {
	st, ok := statOf(f)
	if !ok {
		return 0
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	sc := bufio.NewScanner(bytes.NewReader(locks))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

func statOf(f *os.File) (*syscall.Stat_t, bool) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// processName is the command name of pid, or "".
func processName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
