package router

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// BufferStats is the part of the store the buffer collector reads.
type BufferStats interface {
	// BufferStats returns how many messages the offline buffer holds and
	// when its oldest unexpired one arrived (zero if none).
	BufferStats(ctx context.Context, now time.Time) (messages int, oldest time.Time, err error)
}

// BufferCollector reports the offline buffer's depth and its oldest
// message's age, read from the store when scraped. The buffer is shared by
// every replica, so each reports the same values.
type BufferCollector struct {
	Store   BufferStats
	Timeout time.Duration // per scrape; default 2s
	Now     func() time.Time

	depth, age, up *prometheus.Desc
}

// NewBufferCollector returns a collector reading st.
func NewBufferCollector(st BufferStats) *BufferCollector {
	return &BufferCollector{
		Store: st, Timeout: 2 * time.Second, Now: time.Now,
		depth: prometheus.NewDesc("betcode_relay_buffer_messages", "Messages waiting in the offline buffer for their machines (all machines, all replicas).", nil, nil),
		age:   prometheus.NewDesc("betcode_relay_buffer_oldest_message_age_seconds", "Age of the oldest unexpired message in the offline buffer; 0 when it is empty.", nil, nil),
		up:    prometheus.NewDesc("betcode_relay_buffer_stats_up", "1 if the last scrape could read the buffer's statistics from the store, else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *BufferCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.age
	ch <- c.up
}

// Collect implements prometheus.Collector. A store that does not answer
// within the timeout reports up 0 and no depth or age.
func (c *BufferCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	now := c.Now()
	n, oldest, err := c.Store.BufferStats(ctx, now)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n))
	age := 0.0
	if !oldest.IsZero() {
		age = max(now.Sub(oldest), 0).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
}
