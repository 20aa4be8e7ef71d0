// Package collect takes the hardware inventory of the machine the agent runs
// on. Every collector reads from a root directory: "/" on a live machine, a
// fixture tree (agent/testdata) in tests, so each is tested on the shape of
// real servers. A collector that fails records its error in the report and
// the others still run. Only Options.Live adds what sysfs cannot give (NIC
// firmware through the ethtool ioctl, configured addresses, LLDP heard on
// the wire).
package collect

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rollcall/rollcall/store/inventory"
)

// Options say where and how to collect.
type Options struct {
	// Root is the file system root to read ("/" when empty).
	Root string
	// Live enables what needs the running kernel rather than files: ethtool
	// ioctls, interface addresses, LLDP capture.
	Live bool
	// LLDPWait bounds how long LLDP listens on each NIC (switches send every
	// 30 s by default); 0 turns LLDP off. Only with Live.
	LLDPWait time.Duration
	// Log receives one line per failed collector; nil discards.
	Log *slog.Logger
}

type collector struct{ opts Options }

type step struct {
	name string
	run  func(sysfs, *inventory.Report) error
}

func (c *collector) steps() []step {
	return []step{
		{"dmi", collectDMI},
		{"cpu", collectCPUs},
		{"memory", collectMemory},
		{"disks", collectDisks},
		{"nvme", collectNVMe},
		{"nics", c.collectNICs},
		{"infiniband", collectIB},
		{"pci", c.collectPCI},
		{"tpm", collectTPM},
	}
}

// Collect runs every collector and returns the report (Version set,
// Collected stamped). It never fails as a whole: errors are in r.Errors.
func Collect(ctx context.Context, opts Options) *inventory.Report {
	if opts.Root == "" {
		opts.Root = "/"
	}
	c := &collector{opts: opts}
	fs := sysfs{root: opts.Root}
	r := &inventory.Report{Version: inventory.SchemaVersion, Collected: time.Now().UTC()}

	// LLDP listens while the file-based collectors run.
	var lldpWG sync.WaitGroup
	var lldp []inventory.LLDP
	var lldpErrs []inventory.CollectErr
	if opts.Live && opts.LLDPWait > 0 {
		lldpWG.Add(1)
		go func() {
			defer lldpWG.Done()
			lldp, lldpErrs = listenAll(ctx, fs, opts.LLDPWait)
		}()
	}
	for _, s := range c.steps() {
		c.run(s, fs, r)
	}
	lldpWG.Wait()
	r.LLDP = lldp
	for _, e := range lldpErrs {
		c.logErr(e)
		r.Errors = append(r.Errors, e)
	}
	return r
}

// Identity collects only what enlisting needs (DMI and NICs), quickly.
func Identity(opts Options) *inventory.Report {
	if opts.Root == "" {
		opts.Root = "/"
	}
	c := &collector{opts: Options{Root: opts.Root, Log: opts.Log}}
	fs := sysfs{root: opts.Root}
	r := &inventory.Report{Version: inventory.SchemaVersion}
	c.run(step{"dmi", collectDMI}, fs, r)
	c.run(step{"nics", c.collectNICs}, fs, r)
	return r
}

func (c *collector) run(s step, fs sysfs, r *inventory.Report) {
	err := func() (err error) {
		// A collector meeting a shape of sysfs nobody foresaw must not take
		// the whole inventory down with it.
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return s.run(fs, r)
	}()
	if err != nil {
		e := inventory.CollectErr{Collector: s.name, Error: err.Error()}
		c.logErr(e)
		r.Errors = append(r.Errors, e)
	}
}

func (c *collector) logErr(e inventory.CollectErr) {
	if c.opts.Log != nil {
		c.opts.Log.Warn("collector failed", "collector", e.Collector, "err", e.Error)
	}
}

// listenAll listens for LLDP on every Ethernet NIC whose link is up, all at
// once, for at most wait.
func listenAll(ctx context.Context, fs sysfs, wait time.Duration) ([]inventory.LLDP, []inventory.CollectErr) {
	var r inventory.Report
	c := &collector{}
	_ = c.collectNICs(fs, &r)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var mu sync.Mutex
	var out []inventory.LLDP
	var errs []inventory.CollectErr
	var wg sync.WaitGroup
	for _, n := range r.NICs {
		if !n.Link {
			continue
		}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			got, err := listenLLDP(ctx, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, inventory.CollectErr{Collector: "lldp", Error: name + ": " + err.Error()})
			}
			out = append(out, got...)
		}(n.Name)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Interface < out[j].Interface })
	return out, errs
}

func sortedNumeric(names []string) []int {
	var out []int
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}
