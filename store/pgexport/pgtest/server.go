// Package pgtest gives export tests and benchmarks their real peers: a
// PostgreSQL server started in a temporary directory (Debian's postgresql
// package), and a generator of realistic machines and the commands that
// commission them (fed to the state machine with raftfsm/fsmtest).
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/lab/testenv"
)

// Server is a PostgreSQL server listening only on a Unix socket in its own
// temporary directory.
type Server struct {
	Dir  string // holds data/, the socket and the log
	Port int
	bin  string
	run  []string // prefix that runs a command as the server's owner
}

// Bin finds the PostgreSQL binaries (/usr/lib/postgresql/<ver>/bin), the
// newest version first; "" when none is installed.
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Need returns the binaries or ends the test: skipped with the reason, or
// failed when CI=true (CI installs postgresql; a skip there would hide a
// broken setup; lab/testenv).
func Need(t testing.TB) string {
	t.Helper()
	bin := Bin()
	if bin == "" {
		testenv.Skip(t, "PostgreSQL is not installed (apt-get install postgresql): no /usr/lib/postgresql/*/bin/initdb")
	}
	return bin
}

// Start initialises and starts a server for the test; it is stopped and
// removed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New(Need(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// New initialises and starts a server with the binaries in bin. As root it
// runs as the postgres user, since PostgreSQL refuses to run as root.
func New(bin string) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Port: 5432, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres user to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		s.run = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := s.cmd("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8").CombinedOutput(); err != nil {
		s.Close()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := s.Restart(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

func (s *Server) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append([]string{}, s.run...), append([]string{filepath.Join(s.bin, name)}, args...)...)
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = s.Dir
	return c
}

// DSN connects as the superuser to database postgres over the socket.
func (s *Server) DSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", s.Dir, s.Port)
}

// URL is DSN as a postgres:// URL.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable", s.Dir, s.Port)
}

// Restart starts a stopped server and waits until it accepts connections.
func (s *Server) Restart() error {
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses='' -c fsync=off -c full_page_writes=off -c synchronous_commit=off", s.Dir, s.Port)
	out, err := s.cmd("pg_ctl", "start", "-w", "-t", "60", "-D", s.data(), "-l", filepath.Join(s.Dir, "log"), "-o", opts).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, lastLines(log, 20))
	}
	return nil
}

// Stop stops the server the way an operator's restart would (-m fast:
// connections are cut, open transactions roll back).
func (s *Server) Stop() error {
	if out, err := s.cmd("pg_ctl", "stop", "-m", "fast", "-w", "-D", s.data()).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err == nil {
		s.Stop()
	}
	os.RemoveAll(s.Dir)
}

// Conn opens a connection for the test, closed when it ends.
func (s *Server) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
