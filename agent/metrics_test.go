package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
)

// withMetrics serves the agent's metrics on a free loopback port.
func withMetrics(c *agent.Config) { c.MetricsListen = "127.0.0.1:0" }

// metricsOf is one scrape: each series, written as in the exposition
// (`name{label="value"}`), with its value.
type metricsOf map[string]float64

// scrape GETs the agent's /metrics over HTTP and parses the text format.
func scrape(t *testing.T, a *agent.Agent) metricsOf {
	t.Helper()
	if a.MetricsAddr() == "" {
		t.Fatal("the agent serves no metrics")
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: wait}).Get("http://" + a.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	m := metricsOf{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape: bad line %q", line)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return m
}

// get returns a series that must be there.
func (m metricsOf) get(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := m[series]
	if !ok {
		t.Fatalf("no series %s in the scrape", series)
	}
	return v
}

func finished(status string) string {
	return fmt.Sprintf("chiffon_agent_tasks_finished_total{status=%q}", status)
}

func durationCount(workType string) string {
	return fmt.Sprintf("chiffon_agent_task_duration_seconds_count{work_type=%q}", workType)
}

func dedupeHits(answer string) string {
	return fmt.Sprintf("chiffon_agent_dedupe_hits_total{answer=%q}", answer)
}

const (
	tasksRunning   = "chiffon_agent_tasks_running"
	natsConnected  = "chiffon_agent_nats_connected"
	natsReconnects = "chiffon_agent_nats_reconnects_total"
)

var resultStatuses = []string{envelope.ResultSuccess, envelope.ResultFailed, envelope.ResultCancelled}

// TestMetricsCountTasksByResultStatus runs one task to each way a task ends and
// checks that it is counted once, under the status its work_result has, and timed
// under its work type.
func TestMetricsCountTasksByResultStatus(t *testing.T) {
	h := newHarness(t, withMetrics)
	b := newBlocker()
	h.start(func(a *agent.Agent) {
		a.Handle("block", b.handle)
		a.Handle("fail", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			return agent.Result{ExitCode: 3}, nil
		})
		a.Handle("crash", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			panic("crash")
		})
	})
	for _, s := range resultStatuses {
		if v := scrape(t, h.agent).get(t, finished(s)); v != 0 {
			t.Fatalf("%s = %v before any task", finished(s), v)
		}
	}

	for _, tc := range []struct {
		name     string
		workType string
		params   map[string]any
		hints    *envelope.Hints
		cancel   bool
		want     string
	}{
		{"succeeded", "echo", map[string]any{"message": "hi"}, nil, false, envelope.ResultSuccess},
		{"failed", "fail", nil, nil, false, envelope.ResultFailed},
		{"panicked", "crash", nil, nil, false, envelope.ResultFailed},
		{"past its deadline", "sleep", map[string]any{"seconds": 30}, &envelope.Hints{MaxDurationSeconds: 1}, false, envelope.ResultFailed},
		{"cancelled", "block", nil, nil, true, envelope.ResultCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := scrape(t, h.agent)
			req := h.request(tc.workType, tc.params, tc.hints)
			w := h.send(req)
			if tc.cancel {
				w.waitOutput("started")
				if v := scrape(t, h.agent).get(t, tasksRunning); v != 1 {
					t.Fatalf("%s = %v while the task runs, want 1", tasksRunning, v)
				}
				h.control(&envelope.Cancel{TaskID: req.Payload.(*envelope.WorkRequest).TaskID})
			}
			r, _ := w.result()
			if r.Status != tc.want {
				t.Fatalf("result %s (exit %d), want %s", r.Status, r.ExitCode, tc.want)
			}
			after := scrape(t, h.agent)
			for _, s := range resultStatuses {
				want := 0.0
				if s == r.Status {
					want = 1
				}
				if d := after.get(t, finished(s)) - before[finished(s)]; d != want {
					t.Errorf("%s went up by %v, want %v", finished(s), d, want)
				}
			}
			if d := after.get(t, durationCount(tc.workType)) - before[durationCount(tc.workType)]; d != 1 {
				t.Errorf("%s went up by %v, want 1", durationCount(tc.workType), d)
			}
			if v := after.get(t, tasksRunning); v != 0 {
				t.Errorf("%s = %v after the result, want 0", tasksRunning, v)
			}
		})
	}

	m := scrape(t, h.agent)
	for status, want := range map[string]float64{envelope.ResultSuccess: 1, envelope.ResultFailed: 3, envelope.ResultCancelled: 1} {
		if v := m.get(t, finished(status)); v != want {
			t.Errorf("%s = %v, want %v", finished(status), v, want)
		}
	}
	// The deadline task ran about a second (the deadline is set just before the
	// handler starts): the histogram is in seconds.
	if sum := m.get(t, `chiffon_agent_task_duration_seconds_sum{work_type="sleep"}`); sum < 0.5 || sum > wait.Seconds() {
		t.Errorf("duration sum of the 1s-deadline sleep = %v, want seconds", sum)
	}
	var build bool
	for series, v := range m {
		build = build || strings.HasPrefix(series, "chiffon_agent_build_info{") && v == 1
	}
	if !build {
		t.Error("no chiffon_agent_build_info 1")
	}
}

// TestMetricsCountDuplicatesAnsweredWithoutRunning re-sends a finished and a running
// request: each is a dedupe hit under its answer, and neither runs again.
func TestMetricsCountDuplicatesAnsweredWithoutRunning(t *testing.T) {
	h := newHarness(t, withMetrics)
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })

	echo := h.request("echo", map[string]any{"message": "once"}, nil)
	if r, _ := h.send(echo).result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("echo: %+v", r)
	}
	if r, _ := h.send(echo).result(); r.Output != "once" {
		t.Fatalf("replayed echo: %+v", r)
	}
	m := scrape(t, h.agent)
	if v := m.get(t, dedupeHits("replayed")); v != 1 {
		t.Errorf("%s = %v after a re-sent finished request, want 1", dedupeHits("replayed"), v)
	}
	if v := m.get(t, durationCount("echo")); v != 1 {
		t.Errorf("%s = %v: the duplicate was timed as a task", durationCount("echo"), v)
	}

	block := h.request("block", nil, nil)
	first := h.send(block)
	first.waitOutput("started")
	h.send(block).waitOutput("started") // attached: the output so far comes again
	if v := scrape(t, h.agent).get(t, dedupeHits("reattached")); v != 1 {
		t.Errorf("%s = %v after a re-sent running request, want 1", dedupeHits("reattached"), v)
	}
	close(b.release)
	if r, _ := first.result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("blocked task: %+v", r)
	}
	m = scrape(t, h.agent)
	if v := m.get(t, finished(envelope.ResultSuccess)); v != 2 || b.runs.Load() != 1 {
		t.Errorf("%s = %v, block ran %d times: want 2 tasks, block once", finished(envelope.ResultSuccess), v, b.runs.Load())
	}
	if v := m.get(t, dedupeHits("interrupted")); v != 0 {
		t.Errorf("%s = %v, want 0", dedupeHits("interrupted"), v)
	}
}

// TestMetricsCountInterruptedDuplicate leaves a request's running entry in the cache
// (its result could not be stored), then re-sends it to a new agent process on the
// same dedupe cache: answered as interrupted, counted so, and not run.
func TestMetricsCountInterruptedDuplicate(t *testing.T) {
	mc := memCache(t) // its writes can be made to fail; it outlives the first agent
	h := newHarness(t, func(c *agent.Config) { withMetrics(c); c.DedupeCache = mc })
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
	req := h.request("block", nil, nil)
	w := h.send(req)
	w.waitOutput("started") // the running entry is stored
	agent.BreakCacheWrites(h.agent)
	close(b.release)
	w.result()
	h.stop()
	mc.FailWrites(nil) // the new process finds the disk mended

	again := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", again.handle) })
	if r, _ := h.send(req).result(); r.ExitCode != agent.ExitInterrupted {
		t.Fatalf("duplicate after the restart: %+v", r)
	}
	m := scrape(t, h.agent)
	if v := m.get(t, dedupeHits("interrupted")); v != 1 {
		t.Errorf("%s = %v, want 1", dedupeHits("interrupted"), v)
	}
	if v := m.get(t, finished(envelope.ResultFailed)); v != 0 || again.runs.Load() != 0 {
		t.Errorf("%s = %v, block ran %d times: the duplicate ran", finished(envelope.ResultFailed), v, again.runs.Load())
	}
}

// logSignal is a slog.Handler that closes seen the first time msg is logged.
type logSignal struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (s *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (s *logSignal) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *logSignal) WithGroup(string) slog.Handler            { return s }
func (s *logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == s.msg {
		s.once.Do(func() { close(s.seen) })
	}
	return nil
}

// TestMetricsShowNATSConnectionAndReconnects stops the broker, then starts it again
// on the same port: the connection gauge follows, and the reconnect is counted.
func TestMetricsShowNATSConnectionAndReconnects(t *testing.T) {
	disconnected := &logSignal{msg: "nats disconnected", seen: make(chan struct{})}
	h := newHarness(t, func(c *agent.Config) {
		withMetrics(c)
		c.Logger = slog.New(disconnected)
	})
	h.start(nil)
	m := scrape(t, h.agent)
	if v := m.get(t, natsConnected); v != 1 {
		t.Fatalf("%s = %v while connected, want 1", natsConnected, v)
	}
	if v := m.get(t, natsReconnects); v != 0 {
		t.Fatalf("%s = %v before any reconnect, want 0", natsReconnects, v)
	}

	port := h.srv.Port()
	h.srv.Shutdown()
	select {
	case <-disconnected.seen:
	case <-time.After(wait):
		t.Fatal("the agent did not see the broker go")
	}
	if v := scrape(t, h.agent).get(t, natsConnected); v != 0 {
		t.Fatalf("%s = %v with the broker down, want 0", natsConnected, v)
	}

	registered := make(chan string, 16)
	_, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(m *nats.Msg) { registered <- m.Subject })
	if err != nil {
		t.Fatal(err)
	}
	h.srv = testnats.Start(t, broker.ServerConfig{Port: port})
	waitRegistered(t, registered) // the agent reconnected, counted it, then registered
	m = scrape(t, h.agent)
	if v := m.get(t, natsConnected); v != 1 {
		t.Errorf("%s = %v after the reconnect, want 1", natsConnected, v)
	}
	if v := m.get(t, natsReconnects); v != 1 {
		t.Errorf("%s = %v after one broker restart, want 1", natsReconnects, v)
	}
}

// TestMetricsServedOnlyWhileRunning checks that no address means no server, and that
// the server is gone once Run has returned.
func TestMetricsServedOnlyWhileRunning(t *testing.T) {
	off := newHarness(t, nil)
	off.start(nil)
	if addr := off.agent.MetricsAddr(); addr != "" {
		t.Fatalf("metrics served on %s without metrics_listen", addr)
	}

	h := newHarness(t, withMetrics)
	h.start(nil)
	scrape(t, h.agent)
	h.stop()
	conn, err := net.DialTimeout("tcp", h.agent.MetricsAddr(), wait)
	if err == nil {
		conn.Close()
		t.Fatalf("metrics still served on %s after Run returned", h.agent.MetricsAddr())
	}
}

// TestMetricsListenOnATakenAddressFailsRun checks that Run fails at once, naming
// metrics_listen, when the address is taken.
func TestMetricsListenOnATakenAddressFailsRun(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	h := newHarness(t, func(c *agent.Config) { c.MetricsListen = taken.Addr().String() })
	a, err := agent.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	select {
	case err := <-runErr:
		if err == nil || !strings.Contains(err.Error(), "metrics_listen") || !strings.Contains(err.Error(), taken.Addr().String()) {
			t.Fatalf("Run: %v, want an error naming metrics_listen and %s", err, taken.Addr())
		}
	case <-a.Ready():
		cancel()
		<-runErr
		t.Fatal("the agent ran without its metrics address")
	case <-time.After(wait):
		t.Fatal("Run neither failed nor became ready")
	}
}

func TestMetricsListenMustBeHostPort(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:9101", true},
		{":9101", true},
		{"[::1]:0", true},
		{"localhost:9101", true},
		{"127.0.0.1", false},
		{"127.0.0.1:", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:-1", false},
	} {
		c, err := agent.ParseConfig([]byte(fmt.Sprintf("metrics_listen: %q\n", tc.addr)))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		if named := err != nil && strings.Contains(err.Error(), "metrics_listen"); named == tc.ok {
			t.Errorf("metrics_listen %q: want valid %v, Validate says %v", tc.addr, tc.ok, err)
		}
	}
}
