package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/buildinfo"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// How a duplicate request was answered without running again: the values of the
// answer label of chiffon_agent_dedupe_hits_total.
const (
	// dedupeReplayed: the request had finished; its cached output and result
	// were sent again.
	dedupeReplayed = "replayed"
	// dedupeReattached: the request is running in this process; the new reply
	// subject was attached to its stream.
	dedupeReattached = "reattached"
	// dedupeInterrupted: the request was running when an earlier process
	// stopped; it was answered as interrupted (exit code 137).
	dedupeInterrupted = "interrupted"
)

// durationBuckets span a built-in echo (milliseconds) to a long playbook (an hour).
var durationBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600}

// metrics are the agent's Prometheus metrics, in a registry of its own so that
// several agents in one process (tests, a library user) do not collide. Every
// label takes values from a fixed set (statuses, answers) or from the agent's
// configured work types, never from ids.
type metrics struct {
	reg        *prometheus.Registry
	finished   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	reconnects prometheus.Counter
	dedupeHits *prometheus.CounterVec
	// conn is the NATS connection once Run has made it, read at each scrape.
	conn atomic.Pointer[nats.Conn]
}

// newMetrics registers a's metrics; the gauges read a's state at each scrape.
func newMetrics(a *Agent) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_agent_tasks_finished_total",
			Help: "Tasks run to their work_result, by its status: success, failed or cancelled."}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chiffon_agent_task_duration_seconds",
			Help: "Time from a task's start to its work_result, by work type.", Buckets: durationBuckets}, []string{"work_type"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "chiffon_agent_nats_reconnects_total",
			Help: "Reconnections to NATS after the connection dropped."}),
		dedupeHits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chiffon_agent_dedupe_hits_total",
			Help: "Duplicate requests answered without running again, by answer: replayed (finished, from the dedupe cache), " +
				"reattached (running in this process) or interrupted (running when an earlier process stopped)."}, []string{"answer"}),
	}
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chiffon_agent_tasks_running",
		Help: "Tasks taken and not yet finished."}, func() float64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		return float64(len(a.running))
	})
	connected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chiffon_agent_nats_connected",
		Help: "1 while the agent is connected to NATS, else 0."}, func() float64 {
		if nc := m.conn.Load(); nc != nil && nc.IsConnected() {
			return 1
		}
		return 0
	})
	authFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chiffon_agent_auth_failures_total",
		Help: "Messages refused for a missing or wrong orchestrator token."}, func() float64 {
		return float64(a.authFailures.Load())
	})
	// Every label value is there from the start, at 0, so that rate() sees the
	// first increment.
	for _, s := range []string{envelope.ResultSuccess, envelope.ResultFailed, envelope.ResultCancelled} {
		m.finished.WithLabelValues(s)
	}
	for _, s := range []string{dedupeReplayed, dedupeReattached, dedupeInterrupted} {
		m.dedupeHits.WithLabelValues(s)
	}
	m.reg.MustRegister(m.finished, m.duration, m.reconnects, m.dedupeHits, running, connected, authFailures,
		buildinfo.Gauge("chiffon_agent_build_info"), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// taskFinished counts a task whose work_result has status, and the time it took
// from its start to its result.
func (m *metrics) taskFinished(workType, status string, took time.Duration) {
	m.finished.WithLabelValues(status).Inc()
	m.duration.WithLabelValues(workType).Observe(took.Seconds())
}

// dedupeHit counts a duplicate request answered as answer.
func (m *metrics) dedupeHit(answer string) { m.dedupeHits.WithLabelValues(answer).Inc() }

// checkListenAddr reports whether addr is host:port with a numeric port; the
// host may be empty (every interface), an IP or a name.
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, such as 127.0.0.1:9101, got %q", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port must be a number from 0 to 65535, got %q", port)
	}
	return nil
}

// metricsServer serves GET /metrics on a listener of its own; it owns the
// goroutine that serves until shutdown.
type metricsServer struct {
	srv    *http.Server
	addr   string
	served chan struct{}
}

// startMetricsServer binds addr at once, so that a bad or taken address is an
// error now rather than a log line later, and serves reg's metrics on it.
func startMetricsServer(addr string, reg *prometheus.Registry, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s := &metricsServer{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr:   ln.Addr().String(),
		served: make(chan struct{}),
	}
	log.Info("metrics listening", "addr", s.addr)
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return s, nil
}

// shutdown stops the server, letting scrapes under way finish for a moment, and
// waits for its goroutine.
func (s *metricsServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.served
}
