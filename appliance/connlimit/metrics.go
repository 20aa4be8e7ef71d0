package connlimit

import "github.com/prometheus/client_golang/prometheus"

// Collector exports l's Stats as Prometheus metrics labelled
// listener=name, read at each scrape (nothing to keep in step).
func (l *Listener) Collector(name string) prometheus.Collector {
	labels := prometheus.Labels{"listener": name}
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc("rollcall_http_conns_"+metric, help, nil, labels)
	}
	return &collector{
		l:           l,
		open:        desc("open", "HTTP connections open."),
		idle:        desc("idle", "HTTP connections open and idle between requests."),
		refused:     desc("refused_total", "HTTP connections closed at accept: a cap was full and none was idle."),
		evicted:     desc("evicted_total", "Idle HTTP connections closed to make room for new ones."),
		fdExhausted: desc("fd_exhausted_total", "Accepts that failed for want of file descriptors (EMFILE, ENFILE)."),
	}
}

type collector struct {
	l                                         *Listener
	open, idle, refused, evicted, fdExhausted *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.idle, c.refused, c.evicted, c.fdExhausted} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(s.Open))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.Idle))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(s.Evicted))
	ch <- prometheus.MustNewConstMetric(c.fdExhausted, prometheus.CounterValue, float64(s.FDExhausted))
}
