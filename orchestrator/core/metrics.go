package core

import (
	"net/http"

	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the orchestrator's Prometheus metrics, in a registry of its own so that
// several orchestrators (in tests) do not collide.
type Metrics struct {
	reg          *prometheus.Registry
	tasks        *prometheus.GaugeVec
	latency      prometheus.Histogram
	retries      *prometheus.CounterVec
	breaker      *prometheus.GaugeVec
	messages     *prometheus.CounterVec
	authFailures prometheus.Counter
	// foreignReplies counts messages left unanswered because their reply
	// subject was not their sender's own inbox (reply.go).
	foreignReplies prometheus.Counter
	invalid        prometheus.Counter
	tooLarge       prometheus.Counter
	rateLimited    *prometheus.CounterVec
	leader         prometheus.Gauge
}

// NewMetrics makes the metrics, registered in a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chiffon_orchestrator_tasks",
			Help: "Tasks in the store, by state."}, []string{"state"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "chiffon_orchestrator_dispatch_latency_seconds",
			Help: "Time from sending a work_request to its first work_status.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_retries_total",
			Help: "Retries of tasks, by the error code that caused them."}, []string{"code"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chiffon_orchestrator_breaker_state",
			Help: "Circuit breaker state per agent: 0 closed, 1 half-open, 2 open."}, []string{"agent_id"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_messages_total",
			Help: "Envelopes sent and received, by direction and type."}, []string{"direction", "type"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_auth_failures_total",
			Help: "Messages refused for a missing or wrong bearer token."}),
		foreignReplies: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_foreign_replies_total",
			Help: "Messages not answered because their reply subject was not the inbox of the sender the broker vouches for."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_invalid_messages_total",
			Help: "Messages or output pieces refused as invalid."}),
		tooLarge: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_orchestrator_tasks_too_large_total",
			Help: "Submissions refused because their work_request would not fit in one broker message, or is over a max_request_bytes of the config."}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_orchestrator_rate_limited_total",
			Help: "Routing decisions that left a task queued while the agent's rate limit (its own or its work type's) held it back, by agent."}, []string{"agent_id"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chiffon_orchestrator_leader",
			Help: "1 while this orchestrator leads its group (ha.enabled) or runs alone, 0 on a standby."}),
	}
	m.leader.Set(1)
	m.reg.MustRegister(m.tasks, m.latency, m.retries, m.breaker, m.messages, m.authFailures, m.foreignReplies, m.invalid, m.tooLarge, m.rateLimited, m.leader,
		buildinfo.Gauge("chiffon_build_info"), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// initMetrics counts the stored tasks by state.
func (o *Core) initMetrics() error {
	for _, s := range task.States {
		o.metrics.tasks.WithLabelValues(string(s)).Set(0)
	}
	_, err := o.st.Tasks(func(t *task.Task) bool {
		o.metrics.tasks.WithLabelValues(string(t.State)).Inc()
		return false
	}, 0)
	return err
}

// SetLeader says whether this orchestrator leads its group (or runs alone).
func (m *Metrics) SetLeader(lead bool) {
	if lead {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

// CountForeignReply counts a message left unanswered because its reply
// subject was not its sender's own inbox.
func (m *Metrics) CountForeignReply() { m.foreignReplies.Inc() }
