package appliance

import (
	"os"
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
func TuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}
