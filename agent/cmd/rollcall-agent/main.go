// Command rollcall-agent is the commissioning image's /init. As PID 1 it
// mounts the kernel file systems, loads the image's kernel modules, gets
// addresses by DHCP, runs the agent (enlist, inventory, BMC account,
// commission) and powers the machine off. With rollcall.mode=deploy it runs
// its deploy job instead (agent/deploy: write the OS image to the disk, or
// wipe it) and reboots once the server has acknowledged it; a failed job
// leaves the machine up, for ssh and for the operator to read why. With
// rollcall.mode=stateless it boots the machine into the image named by
// rollcall.root= (agent/stateless: squashfs in RAM, overlayfs, switch_root
// to its init); a failure leaves the machine up with the reason on the
// console. Run by hand on a live system (not
// PID 1) it does only the agent's part and never powers off unless asked:
//
//	rollcall-agent -cmdline 'rollcall.server=http://10.0.0.1:8080 rollcall.token=…'
package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollcall/rollcall/agent"
	"github.com/rollcall/rollcall/agent/deploy"
	"github.com/rollcall/rollcall/agent/nodeenv"
	"github.com/rollcall/rollcall/agent/stateless"
	"github.com/rollcall/rollcall/agent/sysinit"
)

func main() {
	pid1 := os.Getpid() == 1
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log = log.With("agent", agent.Version)

	cmdlineFlag := flag.String("cmdline", "", "kernel command line to use instead of /proc/cmdline")
	root := flag.String("root", "/", "file system root to inventory")
	powerOff := flag.Bool("poweroff", false, "power off at the end (the default only as PID 1)")
	if !pid1 {
		flag.Parse()
	}

	if pid1 {
		if err := sysinit.Mount(); err != nil {
			log.Error("mount", "err", err)
		}
		t := time.Now()
		if err := sysinit.WaitForEntropy(); err != nil {
			log.Error("entropy", "err", err)
		}
		log.Info("random numbers ready", "waited", time.Since(t).Round(time.Millisecond))
	}
	cmdline := *cmdlineFlag
	if cmdline == "" {
		b, err := os.ReadFile("/proc/cmdline")
		if err != nil {
			log.Error("read /proc/cmdline", "err", err)
		}
		cmdline = string(b)
	}
	cfg, err := agent.ParseCmdline(cmdline)
	cfg.Log, cfg.Root, cfg.Live = log, *root, *root == "/"
	if cfg.PowerOff {
		log.Info("rollcall.poweroff: this machine is commissioned; powering off")
		finish(log, pid1 || *powerOff, false, 0)
	}
	if err != nil {
		log.Error("kernel command line", "err", err)
		if cfg.Mode == agent.ModeDeploy {
			stay(log, 2, "a deploy job with a bad kernel command line")
		}
		finish(log, pid1 || *powerOff, cfg.NoPowerOff, 2)
	}

	ctx := context.Background()
	if pid1 {
		dir := filepath.Join("/lib/modules", sysinit.Release())
		loaded, err := sysinit.LoadModules(dir, log)
		if err != nil {
			log.Error("kernel modules", "dir", dir, "err", err)
		}
		log.Info("kernel modules loaded", "count", len(loaded))
		if err := sysinit.MountEFIVars(); err != nil {
			log.Error("efivarfs", "err", err)
		}
		nics := sysinit.WaitForNICs(2*time.Second, 15*time.Second)
		log.Info("network interfaces", "names", strings.Join(nics, " "))
		leases, err := sysinit.Network(ctx, 90*time.Second, log)
		if err != nil {
			log.Error("network", "err", err)
			if cfg.Mode == agent.ModeDeploy || cfg.Mode == agent.ModeStateless {
				stay(log, 1, "no network for the deploy job")
			}
			finish(log, true, cfg.NoPowerOff, 1)
		}
		if cfg.BootMAC == "" {
			cfg.BootMAC = bootMAC(cfg.Server, leases)
		}
	}

	if cfg.Mode == agent.ModeDeploy {
		runDeploy(ctx, log, cfg, pid1)
	}
	if cfg.Mode == agent.ModeStateless {
		runStateless(ctx, log, cmdline)
	}

	start := time.Now()
	res, err := agent.Run(ctx, cfg)
	code := 0
	if err != nil {
		code = 1
		log.Error("commissioning failed", "err", err, "took", time.Since(start).Round(time.Second))
	} else {
		log.Info("commissioning done", "machine", res.Commission.ID, "state", res.Commission.State, "took", time.Since(start).Round(time.Second))
	}
	finish(log, pid1 || *powerOff, cfg.NoPowerOff, code)
}

// runDeploy runs the deploy job and reboots on success (as PID 1); it never
// returns.
func runDeploy(ctx context.Context, log *slog.Logger, cfg agent.Config, pid1 bool) {
	start := time.Now()
	c, err := agent.Connect(ctx, cfg)
	if err != nil {
		log.Error("deploy: connect", "err", err)
		stay(log, 1, "the appliance could not be reached")
	}
	res, err := deploy.Run(ctx, c, deploy.Config{Root: cfg.Root, Log: log})
	if err != nil {
		log.Error("deploy failed", "err", err, "took", time.Since(start).Round(time.Second))
		stay(log, 1, "the job failed: the machine stays up for ssh and for the operator to see why")
	}
	log.Info("deploy job done", "job", res.Job.ID, "kind", res.Job.Kind, "disk", res.Device.Name, "root", res.Root,
		"boot_entry", res.BootEntry, "took", time.Since(start).Round(time.Second))
	if !pid1 {
		os.Exit(0)
	}
	log.Info("rebooting into the installed system")
	if err := sysinit.Reboot(); err != nil {
		log.Error("reboot", "err", err)
	}
	stay(log, 1, "reboot failed")
}

// runStateless boots the image into RAM and executes its init; it returns
// never: a failure keeps the machine up with the reason on the console
// (PID 1), or exits when run by hand, where nothing is done (the switch
// replaces the initramfs).
func runStateless(ctx context.Context, log *slog.Logger, cmdline string) {
	cfg, err := nodeenv.ParseCmdline(cmdline)
	if err == nil {
		err = cfg.CheckBoot()
	}
	if err != nil {
		log.Error("stateless: kernel command line", "err", err)
		stay(log, 2, "a stateless boot with a bad kernel command line")
	}
	if os.Getpid() != 1 {
		log.Info("stateless: settings are good; the boot itself runs only as PID 1 of the initrd", "root", cfg.Root, "hostname", cfg.Hostname)
		os.Exit(0)
	}
	err = stateless.Boot(ctx, cfg, log)
	log.Error("stateless boot failed", "err", err)
	stay(log, 1, "the stateless boot failed")
}

// stay keeps PID 1 alive (or exits with code when run by hand).
func stay(log *slog.Logger, code int, why string) {
	if os.Getpid() != 1 {
		os.Exit(code)
	}
	log.Info("staying up: " + why)
	for {
		time.Sleep(time.Hour)
	}
}

// bootMAC picks the NIC the machine talks to the appliance through: the one
// whose subnet holds the server's address, else the first with a lease.
func bootMAC(server string, leases []sysinit.Lease) string {
	if len(leases) == 0 {
		return ""
	}
	if u, err := url.Parse(server); err == nil {
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			for _, l := range leases {
				if (&net.IPNet{IP: l.IP.Mask(l.Mask), Mask: l.Mask}).Contains(ip) {
					return l.MAC.String()
				}
			}
		}
	}
	return leases[0].MAC.String()
}

// finish powers off, or (rollcall.nopoweroff, or not asked to) stays: PID 1
// must never exit, or the kernel panics.
func finish(log *slog.Logger, powerOff, stay bool, code int) {
	if powerOff && !stay {
		log.Info("powering off")
		if err := sysinit.PowerOff(); err != nil {
			log.Error("power off", "err", err)
		}
	}
	if os.Getpid() != 1 {
		os.Exit(code)
	}
	log.Info("staying up (rollcall.nopoweroff)")
	for {
		time.Sleep(time.Hour)
	}
}
