package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descMessages = prometheus.NewDesc("switchboard_messages_total",
		"Visible timeline messages stored, by channel (source). Database-wide: every instance reports the same value.",
		[]string{"channel"}, nil)
	descQueue = prometheus.NewDesc("switchboard_queue_jobs",
		"Durable jobs (agent turns, outbound deliveries) not yet finalized, by queue and state. Database-wide.",
		[]string{"queue", "state"}, nil)
	descUnfinished = prometheus.NewDesc("switchboard_runs_unfinished",
		"Agent runs without an end, by status (queued, running). Database-wide.",
		[]string{"status"}, nil)
	descOldest = prometheus.NewDesc("switchboard_oldest_unfinished_run_age_seconds",
		"Age of the longest-open agent run (0 when none). Database-wide.", nil, nil)
	descScrapeOK = prometheus.NewDesc("switchboard_db_scrape_success",
		"1 when the database gauges above could be read at this scrape, else 0.", nil, nil)
)

// dbCollector turns a Snapshot into constant metrics at scrape time.
type dbCollector struct {
	m *Metrics

	mu   sync.Mutex
	at   time.Time
	snap Snapshot
	err  error
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMessages, descQueue, descUnfinished, descOldest, descScrapeOK} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.snapshot()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descScrapeOK, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descScrapeOK, prometheus.GaugeValue, 1)
	for channel, n := range snap.MessagesByChannel {
		ch <- prometheus.MustNewConstMetric(descMessages, prometheus.CounterValue, float64(n), channel)
	}
	for _, q := range snap.QueueJobs {
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(q.Jobs), q.Queue, q.State)
	}
	for status, n := range snap.UnfinishedRuns {
		ch <- prometheus.MustNewConstMetric(descUnfinished, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, snap.OldestUnfinishedRun.Seconds())
}

// snapshot reads the Source at most once per CacheFor.
func (c *dbCollector) snapshot() (Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.m.opts.CacheFor {
		return c.snap, c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.m.opts.ScrapeTimeout)
	defer cancel()
	c.snap, c.err = c.m.opts.Source.MetricsSnapshot(ctx)
	c.at = time.Now()
	if c.err != nil {
		c.m.log.Warn("metrics: read database gauges", "err", c.err)
	}
	return c.snap, c.err
}
