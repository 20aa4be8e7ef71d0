package dhcp

import (
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rollcall/rollcall/store"
)

// Metrics are the DHCP server's Prometheus collectors. Make one with
// NewMetrics, register Collectors() where the appliance keeps its registry,
// and pass it in Config; a server without one counts into a private set.
type Metrics struct {
	packetsIn    *prometheus.CounterVec
	packetsOut   *prometheus.CounterVec
	drops        *prometheus.CounterVec
	batches      *prometheus.CounterVec
	batchEntries prometheus.Counter
	batchSeconds prometheus.Histogram
	pending      prometheus.Gauge
	blocks       *prometheus.GaugeVec
	free         *prometheus.GaugeVec
	leases       *leaseCollector
	trimmed      *prometheus.CounterVec
	optDropped   *prometheus.CounterVec

	inBy, outBy [256]prometheus.Counter // per message type, resolved once
	fitBy       [2]prometheus.Counter   // trimmed: fit, over
	// optBy is optDropped per option code, resolved on first use: 256
	// series of zeros would only clutter the exposition.
	optBy [256]atomic.Pointer[prometheus.Counter]
}

func (m *Metrics) in(t dhcpv4.MessageType) prometheus.Counter  { return m.inBy[t] }
func (m *Metrics) out(t dhcpv4.MessageType) prometheus.Counter { return m.outBy[t] }

func (m *Metrics) resolve() *Metrics {
	for t := range 256 {
		name := typeName(dhcpv4.MessageType(t))
		if t == 255 {
			name = "malformed" // not a message type: the packet did not parse
		}
		m.inBy[t] = m.packetsIn.WithLabelValues(name)
		m.outBy[t] = m.packetsOut.WithLabelValues(name)
	}
	m.fitBy[0] = m.trimmed.WithLabelValues("fit")
	m.fitBy[1] = m.trimmed.WithLabelValues("over")
	return m
}

// trim counts a reply that lost options to fit its client's limit; over:
// its essential options alone are past it.
func (m *Metrics) trim(over bool) prometheus.Counter {
	if over {
		return m.fitBy[1]
	}
	return m.fitBy[0]
}

func (m *Metrics) optionDropped(code uint8) prometheus.Counter {
	if c := m.optBy[code].Load(); c != nil {
		return *c
	}
	c := m.optDropped.WithLabelValues(strconv.Itoa(int(code)))
	m.optBy[code].Store(&c)
	return c
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return (&Metrics{
		packetsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_packets_in_total", Help: "DHCP packets received, by message type.",
		}, []string{"type"}),
		packetsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_packets_out_total", Help: "DHCP packets sent, by message type.",
		}, []string{"type"}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_drops_total", Help: "Requests dropped or refused (NAK), by reason.",
		}, []string{"reason"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_lease_batches_total", Help: "Lease batches sent through Raft, by result (ok, failed: retried, refused: applied with entries refused).",
		}, []string{"result"}),
		batchEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollcall_dhcp_lease_batch_entries_total", Help: "Grants, releases and sightings replicated.",
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "rollcall_dhcp_lease_batch_seconds", Help: "Time to replicate one lease batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollcall_dhcp_lease_batch_pending", Help: "Entries waiting to be replicated.",
		}),
		blocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollcall_dhcp_blocks_owned", Help: "Lease blocks this node owns, by subnet.",
		}, []string{"subnet"}),
		free: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rollcall_dhcp_free_addresses", Help: "Free addresses in this node's blocks, by subnet.",
		}, []string{"subnet"}),
		trimmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_replies_trimmed_total",
			Help: "Replies that lost options to fit the client's maximum message size (option 57, RFC 2132 §9.10; 548 bytes without it), by result (fit; over: the essential options alone are past it, sent as they are).",
		}, []string{"result"}),
		optDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollcall_dhcp_reply_options_dropped_total", Help: "Options dropped from replies to fit the client's maximum message size, by option code.",
		}, []string{"option"}),
		leases: &leaseCollector{desc: prometheus.NewDesc("rollcall_dhcp_leases_in_use",
			"Unexpired leases per dynamic range, cluster-wide (from the local store).", []string{"subnet", "range"}, nil)},
	}).resolve()
}

// Collectors returns every collector, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.packetsIn, m.packetsOut, m.drops, m.batches, m.batchEntries,
		m.batchSeconds, m.pending, m.blocks, m.free, m.leases, m.trimmed, m.optDropped}
}

// Drops returns the count of one drop reason (for tests and the console).
func (m *Metrics) Drops(reason string) float64 { return counterValue(m.drops.WithLabelValues(reason)) }

// Trimmed returns how many replies lost options to fit their client's
// maximum message size (for tests and the console).
func (m *Metrics) Trimmed() float64 { return counterValue(m.fitBy[0]) + counterValue(m.fitBy[1]) }

// OptionDrops returns how often option code was dropped from a reply to
// make it fit (for tests and the console).
func (m *Metrics) OptionDrops(code uint8) float64 { return counterValue(m.optionDropped(code)) }

func counterValue(c prometheus.Counter) float64 {
	var pb dto.Metric
	if err := c.Write(&pb); err != nil || pb.Counter == nil {
		return 0
	}
	return pb.Counter.GetValue()
}

// lease.BatchStats
func (m *Metrics) BatchSent(n int, d time.Duration) {
	m.batches.WithLabelValues("ok").Inc()
	m.batchEntries.Add(float64(n))
	m.batchSeconds.Observe(d.Seconds())
}
func (m *Metrics) BatchFailed()  { m.batches.WithLabelValues("failed").Inc() }
func (m *Metrics) BatchRefused() { m.batches.WithLabelValues("refused").Inc() }
func (m *Metrics) Pending(n int) { m.pending.Set(float64(n)) }

// lease.PoolStats
func (m *Metrics) PoolState(subnet netip.Prefix, blocks, free int) {
	m.blocks.WithLabelValues(subnet.String()).Set(float64(blocks))
	m.free.WithLabelValues(subnet.String()).Set(float64(free))
}

// leaseCollector counts unexpired leases per dynamic range at scrape time.
type leaseCollector struct {
	desc *prometheus.Desc
	db   atomic.Pointer[store.DB]
	now  atomic.Pointer[func() time.Time]
}

func (c *leaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *leaseCollector) Collect(ch chan<- prometheus.Metric) {
	db := c.db.Load()
	nowf := c.now.Load()
	if db == nil || nowf == nil {
		return
	}
	now := (*nowf)()
	_ = db.View(func(tx *store.Tx) error {
		ranges, err := tx.Ranges(netip.Prefix{})
		if err != nil {
			return err
		}
		for _, r := range ranges {
			if r.Kind != store.RangeDynamic {
				continue
			}
			n := 0
			_ = tx.Leases(r.First, r.Last, func(l store.Lease) bool {
				if !l.Declined && now.Before(l.Expires) {
					n++
				}
				return true
			})
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), r.Subnet.String(), r.First.String()+"-"+r.Last.String())
		}
		return nil
	})
}
