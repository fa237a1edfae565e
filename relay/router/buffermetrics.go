package router

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/betcode-dev/betcode/relay/store"
)

// BufferStats is the part of the store the buffer collector reads.
type BufferStats interface {
	// BufferStats returns the offline buffer's depth and oldest unexpired
	// message for machines holding a tunnel (recorded as live at or after
	// liveSince) and for offline machines.
	BufferStats(ctx context.Context, now, liveSince time.Time) (connected, offline store.BufferStat, err error)
}

// Machine classes of the buffer metrics' machine_class label.
const (
	// ClassConnected: machines holding a tunnel. Messages waiting for them
	// are being delivered; an old one means delivery is stuck.
	ClassConnected = "connected"
	// ClassOffline: machines without a tunnel. Their messages wait, by
	// design, until the machine comes back or the message expires.
	ClassOffline = "offline"
)

// BufferCollector reports the offline buffer's depth and its oldest
// message's age per machine class (connected, offline), read from the
// store when scraped. The buffer is shared by every replica, so each
// reports the same values.
type BufferCollector struct {
	Store   BufferStats
	Timeout time.Duration // per scrape; default 2s
	Now     func() time.Time
	// PresenceTTL is how long a machine's recorded replica stays live
	// without a heartbeat (the relay's three heartbeats); default 30s.
	PresenceTTL time.Duration

	depth, age, up *prometheus.Desc
}

// NewBufferCollector returns a collector reading st.
func NewBufferCollector(st BufferStats) *BufferCollector {
	class := []string{"machine_class"}
	return &BufferCollector{
		Store: st, Timeout: 2 * time.Second, Now: time.Now, PresenceTTL: 30 * time.Second,
		depth: prometheus.NewDesc("betcode_relay_buffer_messages", "Messages waiting in the offline buffer for their machines, by machine class (connected, offline); all replicas.", class, nil),
		age:   prometheus.NewDesc("betcode_relay_buffer_oldest_message_age_seconds", "Age of the oldest unexpired message in the offline buffer by machine class; 0 when there is none.", class, nil),
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
	connected, offline, err := c.Store.BufferStats(ctx, now, now.Add(-c.PresenceTTL))
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, cs := range []struct {
		class string
		st    store.BufferStat
	}{{ClassConnected, connected}, {ClassOffline, offline}} {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(cs.st.Messages), cs.class)
		age := 0.0
		if !cs.st.Oldest.IsZero() {
			age = max(now.Sub(cs.st.Oldest), 0).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, cs.class)
	}
}
