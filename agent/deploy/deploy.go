// Package deploy is the agent's deploy mode (rollcall.mode=deploy): it
// reads its job from the appliance (GET /api/v1/jobs/self, with the job's
// one-time token in X-Rollcall-Job), and for a deploy job wipes the disk's
// signatures, streams the image (HTTP → SHA-256 → zstd → SHA-256 → the
// block device), verifies both hashes and sizes, re-reads the partition
// table, moves the backup GPT to the disk's end, finds the root file
// system (ext4, XFS, LVM), writes the NoCloud seed and the cluster CA,
// adds a UEFI boot entry on UEFI hosts, and reports every step (POST
// /api/v1/jobs/self/progress, every 3 s during long ones). A release job
// wipes the disk (quick: signatures and both ends; full: every block).
//
// On any failure after the first write the disk's partition tables are
// zeroed, so a disk is either the image, verified, or empty. The caller
// (the agent's PID 1) reboots only when Run returns nil, which is after the
// server acknowledged "done"; on failure it stays up.
//
// It imports nothing of the server: the Server interface is the two calls
// it needs from the agent's client.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Server is what the deploy mode needs of the appliance: JSON calls (the
// job's token in X-Rollcall-Job on each) and a streamed GET of the image.
type Server interface {
	Do(ctx context.Context, method, path string, in, out any) error
	// Open GETs url (a path on the appliance, or an absolute URL) and
	// returns the body of a 200 answer.
	Open(ctx context.Context, url string) (io.ReadCloser, error)
}

// API paths of the job protocol.
const (
	PathJob      = "/api/v1/jobs/self"
	PathProgress = "/api/v1/jobs/self/progress"
)

// DefaultProgressEvery is how often a long step reports.
const DefaultProgressEvery = 3 * time.Second

// Config says where the agent runs.
type Config struct {
	Root          string        // where sys/ and dev/ are: "/" live, a fake tree in tests
	DevDir        string        // where loop devices are (default /dev)
	WorkDir       string        // mount points (default /run/rollcall-deploy)
	Device        *Device       // the target, skipping disk resolution (tests, the benchmark)
	EFIVars       string        // efivarfs; default Root/sys/firmware/efi/efivars when Root/sys/firmware/efi exists
	ProgressEvery time.Duration // default DefaultProgressEvery
	Log           *slog.Logger
}

// ErrCancelled: the operator cancelled the job (the server answered a
// progress report with cancel=true).
var ErrCancelled = errors.New("cancelled")

// Result is what a job did.
type Result struct {
	Job       *Job
	Device    Device
	Root      string // the root volume found ("partition 1")
	Loader    string // the UEFI loader path, on UEFI hosts
	BootEntry string // "Boot0003"
	Wrote     []string
}

// Run fetches the job and runs it to the end: nil only once the server has
// acknowledged "done".
func Run(ctx context.Context, srv Server, cfg Config) (*Result, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.DevDir == "" {
		cfg.DevDir = "/dev"
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = "/run/rollcall-deploy"
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.EFIVars == "" {
		if _, err := os.Stat(filepath.Join(cfg.Root, "sys/firmware/efi")); err == nil {
			cfg.EFIVars = filepath.Join(cfg.Root, "sys/firmware/efi/efivars")
		}
	}
	job := &Job{}
	if err := srv.Do(ctx, http.MethodGet, PathJob, nil, job); err != nil {
		return nil, fmt.Errorf("get job: %w", err)
	}
	log := cfg.Log.With("job", job.ID, "kind", job.Kind)
	r := newReporter(ctx, srv, cfg.ProgressEvery, log)
	defer r.stop()
	res := &Result{Job: job}
	run := &runner{cfg: cfg, log: log, rep: r, job: job, res: res}
	err := run.run(r.ctx)
	if err != nil {
		if errors.Is(context.Cause(r.ctx), ErrCancelled) {
			err = fmt.Errorf("%w by the operator (during %s)", ErrCancelled, r.step())
		}
		run.cleanup(err)
		r.fail(err)
		return res, err
	}
	if err := run.t.Close(); err != nil {
		run.cleanup(err)
		r.fail(err)
		return res, err
	}
	run.t = nil
	if err := r.finish(); err != nil {
		return res, err
	}
	return res, nil
}

type runner struct {
	cfg     Config
	log     *slog.Logger
	rep     *reporter
	job     *Job
	res     *Result
	t       *target
	started bool // something was written to the disk
	root    *rootMount
}

func (u *runner) run(ctx context.Context) error {
	u.rep.begin(StepWipe, 0, "")
	if err := u.job.Validate(); err != nil {
		return fmt.Errorf("bad job: %w", err)
	}
	var dev Device
	switch {
	case u.cfg.Device != nil:
		dev = *u.cfg.Device
	default:
		var err error
		need, ss := u.job.Image.RawSize, u.job.sectorSize()
		if u.job.Kind == KindRelease {
			need, ss = 0, 0
		}
		if dev, err = Resolve(u.cfg.Root, u.job.Disk, ss, need); err != nil {
			return err
		}
	}
	t, err := openTarget(dev)
	if err != nil {
		return err
	}
	u.t = t
	u.res.Device = t.dev
	if u.job.Kind == KindDeploy {
		if ss := u.job.sectorSize(); t.dev.SectorSize != ss {
			return fmt.Errorf("disk %s has %d-byte sectors, the image %d-byte ones: its partition table would not be found", dev.Name, t.dev.SectorSize, ss)
		}
		if t.dev.Size < u.job.Image.RawSize {
			return fmt.Errorf("disk %s is %d bytes, smaller than the image (%d bytes)", dev.Name, t.dev.Size, u.job.Image.RawSize)
		}
	}
	u.log.Info("target disk", "name", dev.Name, "path", dev.Path, "serial", dev.Serial, "wwn", dev.WWN, "bytes", t.dev.Size, "sector", t.dev.SectorSize)
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if u.job.Kind == KindRelease {
		if err := u.wipe(); err != nil {
			return err
		}
		return u.release(ctx)
	}
	return u.deploy(ctx)
}

// wipe clears the disk's signatures: the first write to it.
func (u *runner) wipe() error {
	u.started = true
	n, err := wipeSignatures(u.t)
	if err != nil {
		return err
	}
	u.rep.done(fmt.Sprintf("disk %s (serial %q): signatures of %d partitions and both ends wiped", u.t.dev.Name, u.t.dev.Serial, n))
	return nil
}

func (u *runner) release(ctx context.Context) error {
	if u.job.Wipe != WipeFull {
		return nil
	}
	var done atomic.Int64
	u.rep.begin(StepWipeFull, u.t.dev.Size, "")
	u.rep.track(&done)
	if err := fullWipe(ctx, u.t, &done); err != nil {
		return err
	}
	u.rep.done(fmt.Sprintf("%d bytes zeroed", u.t.dev.Size))
	return nil
}

func (u *runner) deploy(ctx context.Context) error {
	// The download starts before the wipe: an image in a format the agent
	// does not write is refused before the disk is touched.
	im := u.job.Image
	body, err := u.openImage(ctx)
	if err != nil {
		return err
	}
	var st writeStats
	s, err := openStream(body, im, &st)
	if err != nil {
		return err
	}
	if err := u.wipe(); err != nil {
		s.body.Close()
		return err
	}
	u.rep.begin(StepDownload, im.Size, im.URL)
	u.rep.done(fmt.Sprintf("%s, %d bytes", s.format, im.Size))
	u.rep.begin(StepWrite, im.RawSize, "")
	u.rep.track(&st.raw)
	start := time.Now()
	if err := writeImage(ctx, u.t, s, im, &st); err != nil {
		if errors.Is(err, ErrVerify) {
			u.rep.set(StepVerify)
		}
		return err
	}
	took := time.Since(start)
	u.rep.done(fmt.Sprintf("%d bytes (%v) in %v, %.0f MB/s", im.RawSize, st.format.Load(), took.Round(time.Millisecond), float64(im.RawSize)/1e6/max(took.Seconds(), 1e-9)))
	u.rep.begin(StepVerify, 0, "")
	u.rep.done("sha256 of the file and of the raw image match")

	u.rep.begin(StepPartitions, 0, "")
	if err := u.t.rereadPartitions(); err != nil {
		// The table is read below from the disk itself; the kernel's view
		// matters only for partition device nodes, which the agent does not use.
		u.log.Warn("re-read partition table", "err", err)
	}
	tab, err := ReadTable(u.t, u.t.dev.Size, u.t.dev.SectorSize)
	if err != nil {
		return fmt.Errorf("after writing the image: %w", err)
	}
	u.rep.done(fmt.Sprintf("%s with %d partitions", tab.Kind, len(tab.Partitions)))

	u.rep.begin(StepGPT, 0, "")
	moved, err := MoveBackupGPT(u.t, tab, u.t.dev.Size)
	if err != nil {
		return err
	}
	if moved {
		if err := u.t.sync(); err != nil {
			return err
		}
		if err := u.t.rereadPartitions(); err != nil {
			u.log.Warn("re-read partition table", "err", err)
		}
		u.rep.done("backup GPT moved to the end of the disk")
	} else {
		u.rep.done("backup GPT already at the end (or no GPT)")
	}

	u.rep.begin(StepRoot, 0, "")
	if err := os.MkdirAll(u.cfg.WorkDir, 0o700); err != nil {
		return err
	}
	root, err := findRoot(u.t, tab, u.cfg.DevDir, mountDir(u.cfg.WorkDir), u.log)
	if err != nil {
		return err
	}
	u.root = root
	u.res.Root = root.vol.desc
	u.rep.done(fmt.Sprintf("%s (%s)", root.vol.desc, root.vol.fstype))

	u.rep.begin(StepSeed, 0, "")
	wrote, err := writeSeed(root.dir, u.job.Seed)
	u.res.Wrote = append(u.res.Wrote, wrote...)
	if err != nil {
		return err
	}
	u.rep.done(fmt.Sprintf("%d files", len(wrote)))

	u.rep.begin(StepTrust, 0, "")
	wrote, err = writeTrust(root.dir, u.job.CAPEM, u.job.SELinuxRelabel)
	u.res.Wrote = append(u.res.Wrote, wrote...)
	if err != nil {
		return err
	}
	u.root = nil
	if err := root.close(); err != nil {
		return err
	}
	if err := u.t.sync(); err != nil {
		return err
	}
	u.rep.done(fmt.Sprintf("%d files", len(wrote)))

	if u.cfg.EFIVars != "" {
		u.rep.begin(StepEFI, 0, "")
		msg, err := u.bootEntry(tab)
		if err != nil {
			return err
		}
		u.rep.done(msg)
	}
	return nil
}

func (u *runner) openImage(ctx context.Context) (io.ReadCloser, error) {
	body, err := u.rep.srv.Open(ctx, u.job.Image.URL)
	if err != nil {
		return nil, fmt.Errorf("download the image: %w", err)
	}
	return body, nil
}

func (u *runner) bootEntry(tab *Table) (string, error) {
	var esp *Partition
	for i, p := range tab.Partitions {
		if p.Type == TypeESP {
			esp = &tab.Partitions[i]
			break
		}
	}
	if esp == nil {
		return "", errors.New("this machine boots UEFI and the image has no EFI system partition")
	}
	loader, err := FindLoader(io.NewSectionReader(u.t, esp.Start, esp.Size), esp.Size)
	if err != nil {
		return "", err
	}
	label := u.job.EFILabel
	if label == "" {
		label = "rollcall"
	}
	n, err := SetBootEntry(u.cfg.EFIVars, label, *esp, loader, u.log)
	if err != nil {
		return "", err
	}
	u.res.Loader, u.res.BootEntry = loader, fmt.Sprintf("Boot%04X", n)
	return fmt.Sprintf("%s %q: %s, first after network boot", u.res.BootEntry, label, loader), nil
}

// cleanup leaves the disk empty after a failure past the first write.
func (u *runner) cleanup(cause error) {
	if u.root != nil {
		if err := u.root.close(); err != nil {
			u.log.Warn("unmount after failure", "err", err)
		}
	}
	if u.t == nil {
		return
	}
	defer u.t.Close()
	if !u.started || u.job.Kind == KindRelease && errors.Is(cause, ErrCancelled) {
		return
	}
	if err := zeroTables(u.t); err != nil {
		u.log.Error("zeroing the partition tables after the failure failed too", "err", err)
		return
	}
	u.log.Info("partition tables zeroed after the failure", "disk", u.t.dev.Path)
}

// reporter posts progress: at each step's start and end, and every
// `every` while a step runs. A reply with cancel=true cancels ctx with
// ErrCancelled.
type reporter struct {
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	srv    Server
	log    *slog.Logger

	mu    sync.Mutex // guards cur and count
	cur   Progress
	count *atomic.Int64
	// postMu keeps reports in order: a periodic one taken before a step
	// ended is not sent after the step's own "done".
	postMu sync.Mutex

	quit chan struct{}
	wg   sync.WaitGroup
}

func newReporter(ctx context.Context, srv Server, every time.Duration, log *slog.Logger) *reporter {
	r := &reporter{parent: ctx, srv: srv, log: log, quit: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-r.quit:
				return
			case <-tick.C:
				r.postMu.Lock()
				r.mu.Lock()
				p := r.snapshot()
				r.mu.Unlock()
				if p.State == StateRunning {
					r.send(p)
				}
				r.postMu.Unlock()
			}
		}
	}()
	return r
}

func (r *reporter) snapshot() Progress {
	p := r.cur
	if r.count != nil {
		p.Bytes = r.count.Load()
	}
	return p
}

func (r *reporter) step() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.Step
}

func (r *reporter) begin(step string, total int64, msg string) {
	r.postMu.Lock()
	defer r.postMu.Unlock()
	r.mu.Lock()
	r.cur, r.count = Progress{Step: step, State: StateRunning, Total: total, Message: msg}, nil
	p := r.cur
	r.mu.Unlock()
	r.log.Info("step", "step", step, "state", StateRunning)
	r.send(p)
}

// track makes the periodic reports carry n as the step's bytes.
func (r *reporter) track(n *atomic.Int64) {
	r.mu.Lock()
	r.count = n
	r.mu.Unlock()
}

// set renames the current step (a failure found while verifying).
func (r *reporter) set(step string) {
	r.mu.Lock()
	r.cur.Step = step
	r.mu.Unlock()
}

func (r *reporter) done(msg string) {
	r.postMu.Lock()
	defer r.postMu.Unlock()
	r.mu.Lock()
	p := r.snapshot()
	p.State, p.Message = StateDone, msg
	if p.Total > 0 {
		p.Bytes = p.Total
	}
	r.cur, r.count = p, nil
	r.mu.Unlock()
	r.log.Info("step", "step", p.Step, "state", StateDone, "message", msg)
	r.send(p)
}

// send posts one report; the caller holds postMu.
func (r *reporter) send(p Progress) {
	var rep ProgressReply
	if err := r.srv.Do(r.parent, http.MethodPost, PathProgress, p, &rep); err != nil {
		r.log.Warn("progress report not delivered", "step", p.Step, "err", err)
		return
	}
	if rep.Cancel && r.ctx.Err() == nil {
		r.log.Warn("the server cancelled the job", "step", p.Step)
		r.cancel(ErrCancelled)
	}
}

// fail reports the failure on the step it happened in.
func (r *reporter) fail(err error) {
	r.stop()
	r.mu.Lock()
	p := r.snapshot()
	r.mu.Unlock()
	p.State, p.Message = StateFailed, err.Error()
	r.log.Error("job failed; staying up", "step", p.Step, "err", err)
	if e := r.srv.Do(r.parent, http.MethodPost, PathProgress, p, nil); e != nil {
		r.log.Error("failure report not delivered", "err", e)
	}
}

// finish reports done and returns nil only once the server acknowledged it.
func (r *reporter) finish() error {
	r.stop()
	p := Progress{Step: StepDone, State: StateDone}
	if err := r.srv.Do(r.parent, http.MethodPost, PathProgress, p, nil); err != nil {
		return fmt.Errorf("the server did not acknowledge done: %w", err)
	}
	r.log.Info("done acknowledged")
	return nil
}

func (r *reporter) stop() {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	r.wg.Wait()
}
