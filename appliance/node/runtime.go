package node

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
)

// TuneRuntime sets the garbage collector for a node process, unless the
// environment already does (GOGC, GOMEMLIMIT). A node's live heap is small
// (the store lives in bbolt's mmap, not on the heap), so Go's default
// GOGC=100 collects after every few megabytes allocated; at DHCP and TFTP
// packet rates that was 18% of the node's CPU (profiled in lab/bench/dhcp at
// 9,000 exchanges/s). GOGC=400 collects a quarter as often; the soft memory
// limit makes the collector work harder again before the heap reaches
// 1 GiB, so the trade stays bounded on a small appliance.
//
// On machines with one or two CPUs it runs three Ps (GOMAXPROCS): the DHCP
// workers are OS threads parked in recvmsg, and a thread coming back from
// the kernel with a packet needs a free P; with one P per CPU, a store
// apply or the collector holding the others made replies wait for a
// preemption (up to 10 ms), and those waits, not the work, were the
// reply-latency tail perfdhcp's socket overflowed on. Measured on two CPUs
// (lab/bench/dhcp, plain DORA, three stores): 2 Ps sustained 11,000
// exchanges/s, 3 Ps 12,900, 4 Ps 12,000 but with 1,000 concurrent HTTP
// downloads falling from 1.4x to 1.0-1.2x nginx (3 Ps: 1.28x). The extra P
// leaves the sharing of the CPUs to the kernel's scheduler.
func TuneRuntime() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 3 {
		runtime.GOMAXPROCS(3)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}

// backgroundNice is the nice value LowerBackground gave the node's threads; the
// DHCP service runs its reply threads at 0, ahead of them.
var backgroundNice int

// LowerBackground (rollcall serve calls it first) sets every thread of the process to nice
// ROLLCALL_BACKGROUND_NICE (default 5; 0 leaves them), so that the threads
// Go starts later inherit it, and only the DHCP reply threads run at 0.
// On a node confined to one CPU the reply loop otherwise waits behind Raft,
// the batch applies and the collector, and its replies leave in bunches
// (measured in lab/bench/dhcp: see issue 5's note).
func LowerBackground() {
	nice := 5
	if v, err := strconv.Atoi(os.Getenv("ROLLCALL_BACKGROUND_NICE")); err == nil && v >= 0 && v <= 19 {
		nice = v
	}
	if nice == 0 {
		return
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
		}
	}
	backgroundNice = nice
}
