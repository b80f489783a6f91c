// Package metrics holds the orchestrator's Prometheus metrics, in a registry of
// their own (so that several orchestrators in one process do not collide),
// shared by every core the orchestrator runs and served by its HTTP API.
package metrics

import (
	"net/http"

	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the orchestrator's metrics; each field is the metric its Help
// in New describes.
type Metrics struct {
	reg *prometheus.Registry
	// Tasks counts the stored tasks by state.
	Tasks *prometheus.GaugeVec
	// Latency is the time from a work_request to its first work_status.
	Latency prometheus.Histogram
	// Retries counts retries by the error code that caused them.
	Retries *prometheus.CounterVec
	// Breaker is each agent's circuit breaker state.
	Breaker *prometheus.GaugeVec
	// Messages counts envelopes by direction and type.
	Messages *prometheus.CounterVec
	// AuthFailures counts messages refused for their token.
	AuthFailures prometheus.Counter
	// ForeignReplies counts messages left unanswered because their reply
	// subject was not their sender's own inbox.
	ForeignReplies prometheus.Counter
	// Invalid counts messages or output pieces refused as invalid.
	Invalid prometheus.Counter
	// TooLarge counts submissions refused for their size.
	TooLarge prometheus.Counter
	// RateLimited counts routing decisions a rate limit held back, by agent.
	RateLimited *prometheus.CounterVec
	// Leader is 1 while this orchestrator leads its group or runs alone.
	Leader prometheus.Gauge
}

// New makes the metrics, registered in a registry of their own.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		Tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chiffon_orchestrator_tasks",
			Help: "Tasks in the store, by state."}, []string{"state"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chiffon_orchestrator_dispatch_latency_seconds",
			Help: "Time from sending a work_request to its first work_status.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_retries_total",
			Help: "Retries of tasks, by the error code that caused them."}, []string{"code"}),
		Breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chiffon_orchestrator_breaker_state",
			Help: "Circuit breaker state per agent: 0 closed, 1 half-open, 2 open."}, []string{"agent_id"}),
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_messages_total",
			Help: "Envelopes sent and received, by direction and type."}, []string{"direction", "type"}),
		AuthFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_auth_failures_total",
			Help: "Messages refused for a missing or wrong bearer token."}),
		ForeignReplies: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_foreign_replies_total",
			Help: "Messages not answered because their reply subject was not the inbox of the sender the broker vouches for."}),
		Invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_invalid_messages_total",
			Help: "Messages or output pieces refused as invalid."}),
		TooLarge: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_tasks_too_large_total",
			Help: "Submissions refused because their work_request would not fit in one broker message, or is over a max_request_bytes of the config."}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_rate_limited_total",
			Help: "Routing decisions that left a task queued while the agent's rate limit (its own or its work type's) held it back, by agent."}, []string{"agent_id"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chiffon_orchestrator_leader",
			Help: "1 while this orchestrator leads its group (ha.enabled) or runs alone, 0 on a standby."}),
	}
	m.Leader.Set(1)
	m.reg.MustRegister(m.Tasks, m.Latency, m.Retries, m.Breaker, m.Messages, m.AuthFailures, m.ForeignReplies, m.Invalid, m.TooLarge, m.RateLimited, m.Leader,
		buildinfo.Gauge("chiffon_build_info"), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// SetLeader says whether this orchestrator leads its group (or runs alone).
func (m *Metrics) SetLeader(lead bool) {
	if lead {
		m.Leader.Set(1)
	} else {
		m.Leader.Set(0)
	}
}
