package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func wantInUse(t *testing.T, err error, pid int) {
	t.Helper()
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second open: %v, want ErrInUse", err)
	}
	for _, s := range []string{"in use", fmt.Sprintf("process %d", pid)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), "timeout") || errors.Is(err, ErrDamaged) {
		t.Errorf("an open store reported as damaged: %v", err)
	}
}

// bbolt's flock belongs to the open file description, so a second open in
// one process is refused like one from another process, naming the holder.
func TestSecondOpenNamesHolder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the lock holder is found in /proc/locks, on Linux only")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	second, err := Open(path)
	if err == nil {
		second.Close()
	}
	wantInUse(t, err, os.Getpid())
	if !strings.Contains(err.Error(), "this process, which has it open") {
		t.Errorf("message does not say the holder is this process: %v", err)
	}
	// The first open is untouched.
	if _, _, err := db.Applied(); err != nil {
		t.Fatal(err)
	}
}

// A store held by another process (this test binary, run again as the
// holder) is refused with that process's PID and name.
func TestOpenHeldByAnotherProcess(t *testing.T) {
	if path := os.Getenv("STORE_HOLD"); path != "" {
		// The holder: keep the store open until stdin closes.
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		fmt.Println("holding")
		bufio.NewReader(os.Stdin).ReadString('\n')
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("the lock holder is found in /proc/locks, on Linux only")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenHeldByAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STORE_HOLD="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close() // the holder closes the store and exits
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "holding" {
		t.Fatalf("holder: %q %v", line, err)
	}
	db, err := Open(path)
	if err == nil {
		db.Close()
	}
	wantInUse(t, err, cmd.Process.Pid)
	if name := processName(cmd.Process.Pid); name == "" || !strings.Contains(err.Error(), "("+name+")") {
		t.Errorf("message does not name the process %q: %v", name, err)
	}
}
