package appliance

import (
	"os"
	"runtime"
	"runtime/debug"
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
// On machines with fewer than four CPUs it also runs four Ps (GOMAXPROCS):
// the DHCP workers are OS threads parked in recvmsg, and a thread coming
// back from the kernel with a packet needs a free P; with one P per CPU, a
// store apply or the collector holding the others made replies wait for a
// scheduler preemption (up to 10 ms), and those waits, not the work, were
// the reply-latency tail perfdhcp overflowed on (lab/bench/dhcp: 11,000
// exchanges/s sustained with 2 Ps, 12,000 with 4, on two CPUs). Extra Ps
// leave the sharing of the CPUs to the kernel's scheduler.
func TuneRuntime() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 4 {
		runtime.GOMAXPROCS(4)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}
