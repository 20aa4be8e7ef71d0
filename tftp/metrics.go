package tftp

import "github.com/prometheus/client_golang/prometheus"

// Refusal reasons (label "reason" of rollcall_tftp_refused_total).
const (
	refusedMalformed  = "malformed"  // not a parseable RRQ/WRQ
	refusedWrite      = "write"      // a WRQ: we are read-only
	refusedBusy       = "busy"       // MaxTransfers transfers in flight
	refusedPerClient  = "per-client" // MaxPerClient transfers in flight from the source address
	refusedBadName    = "bad-name"   // control characters, not UTF-8, the root itself
	refusedNotFound   = "not-found"  // no allow-list entry or resolver answer
	refusedDenied     = "denied"     // found but not servable: escapes its root, not a regular file, unreadable
	refusedResolver   = "resolver"   // the Resolver failed
	refusedUnexpected = "unexpected" // DATA/ACK/ERROR/OACK sent to the listening port
	refusedDuplicate  = "duplicate"  // a retransmitted RRQ for a transfer already running
	refusedSocket     = "socket"     // no transfer socket could be opened
)

// Failure reasons (label "reason" of rollcall_tftp_transfers_failed_total).
const (
	failedTimeout  = "timeout"    // no ACK after Retries retransmissions
	failedPeer     = "peer-error" // the client sent an ERROR mid-transfer
	failedRead     = "read-error" // reading the file failed
	failedSend     = "send-error" // the socket refused a datagram
	failedCanceled = "canceled"   // the server stopped
	failedExpired  = "expired"    // still running at the end of its lifetime (Config.MaxLifetime, MinRate)
)

// Metrics are the TFTP server's Prometheus collectors; the appliance
// registers them (Collectors) on its registry.
type Metrics struct {
	started  prometheus.Counter
	finished *prometheus.CounterVec
	failed   *prometheus.CounterVec
	refused  *prometheus.CounterVec
	bytes    prometheus.Counter
	inFlight prometheus.Gauge
}

func newMetrics() *Metrics {
	m := &Metrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_tftp_transfers_started_total", Help: "Read transfers started (a file was opened for a request).",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_tftp_transfers_finished_total",
			Help: `Transfers that ended normally: result "complete", or "size-probe" when the client aborted after learning tsize (UEFI firmware does this first).`,
		}, []string{"result"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_tftp_transfers_failed_total", Help: "Transfers that failed, by reason.",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_tftp_refused_total", Help: "Requests refused before a transfer started, by reason.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_tftp_bytes_sent_total", Help: "File bytes sent in DATA packets, retransmissions excluded.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_tftp_transfers_in_flight", Help: "Transfers in progress.",
		}),
	}
	// Make every series exist from the start so rates work from zero.
	for _, r := range []string{"complete", "size-probe"} {
		m.finished.WithLabelValues(r)
	}
	for _, r := range []string{failedTimeout, failedPeer, failedRead, failedSend, failedCanceled, failedExpired} {
		m.failed.WithLabelValues(r)
	}
	for _, r := range []string{refusedMalformed, refusedWrite, refusedBusy, refusedPerClient, refusedBadName, refusedNotFound,
		refusedDenied, refusedResolver, refusedUnexpected, refusedDuplicate, refusedSocket} {
		m.refused.WithLabelValues(r)
	}
	return m
}

// Collectors returns every collector to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.finished, m.failed, m.refused, m.bytes, m.inFlight}
}
