package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go/jetstream"
)

// soak reports whether CHIFFON_SOAK=1 asks for the large counts.
func soak() bool { return os.Getenv("CHIFFON_SOAK") == "1" }

// scenario is one reliability scenario: a workload of "count" tasks, faults injected
// while it runs, and the checks every scenario ends with.
type scenario struct {
	// tasks and soakTasks are the default and CHIFFON_SOAK=1 task counts.
	tasks, soakTasks int
	agents           int
	// sleep gives task i's SLEEP parameter ("" for none).
	sleep func(i int) string
	// every paces the submits, one task every so often, while inject runs: a load
	// that keeps coming through the faults. 0 submits all tasks before inject.
	every time.Duration
	// faults is the orchestrator's CHIFFON_FAULTS (test builds only).
	faults   string
	logLevel string
	// bound is the longest a task may take from its first dispatch to its end.
	bound time.Duration
	// deadline is how long after the last submit is due (tasks × every after the
	// first) every task must have ended; 0 means 2 min + 50 ms a task.
	deadline time.Duration
	// defaultBreaker runs the orchestrator without a breaker section: the default
	// breaker, which stays open for a minute, instead of relBreaker.
	defaultBreaker bool
	// interrupted allows failed tasks that the agent reported interrupted (137).
	interrupted bool
	// inject breaks things while the tasks run, on the test's goroutine; w says how
	// many tasks have ended.
	inject func(c *cluster, w *watch)
	// store is the orchestrator's task store; runScenarios sets it.
	store string
}

// stores are the task stores every scenario runs on.
var stores = []string{orchestrator.StoreBadger, orchestrator.StoreJetStream}

// runScenarios runs sc once on each task store, as subtests named after them, and
// calls check, if set, with each run's cluster.
func runScenarios(t *testing.T, sc scenario, check func(t *testing.T, c *cluster)) {
	for _, store := range stores {
		t.Run(store, func(t *testing.T) {
			sc := sc
			sc.store = store
			c := runScenario(t, sc)
			if check != nil {
				check(t, c)
			}
		})
	}
}

// watch follows a running workload from the orchestrator's metrics.
type watch struct {
	c     *cluster
	total int
	// deadline is when the whole workload must have ended.
	deadline time.Time
}

// finished returns how many tasks are in a final state, or -1 while the
// orchestrator does not answer.
func (w *watch) finished() int {
	m, err := w.c.metrics()
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range []string{"succeeded", "failed", "cancelled", "error"} {
		n += int(m[`chiffon_orchestrator_tasks{state="`+s+`"}`])
	}
	return n
}

// atFraction waits until frac of the tasks have ended.
func (w *watch) atFraction(frac float64) {
	want := int(frac * float64(w.total))
	w.c.waitFor(fmt.Sprintf("%d of %d tasks finished", want, w.total), time.Until(w.deadline), func() bool {
		return w.finished() >= want
	})
}

// report is what one scenario measured.
type report struct {
	submitted int
	byState   map[string]int
	submit    time.Duration
	run       time.Duration
	maxTask   time.Duration
}

// runScenario runs sc on a fresh cluster and checks the guarantees.
func runScenario(t *testing.T, sc scenario) *cluster {
	n := sc.tasks
	if soak() {
		n = sc.soakTasks
	}
	c := newCluster(t, sc.agents)
	if sc.logLevel != "" {
		c.logLevel = sc.logLevel
	}
	if sc.faults != "" {
		c.orchEnv = []string{"CHIFFON_FAULTS=" + sc.faults}
	}
	if sc.defaultBreaker {
		c.breaker = ""
	}
	if sc.store != "" {
		c.store = sc.store
	}
	c.writeOrchConfig()
	c.start()
	base := c.resources()

	rep := report{submitted: n, byState: map[string]int{}}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	submitted, done := make(chan error, 1), make(chan struct{})
	t.Cleanup(func() { cancel(); <-done }) // a test that failed midway stops submitting
	var ids map[string]int
	go func() {
		defer close(done)
		var err error
		ids, err = c.submitPaced(ctx, n, sc.sleep, sc.every)
		rep.submit = time.Since(start)
		submitted <- err
	}()
	waitSubmitted := func() {
		if err := <-submitted; err != nil {
			t.Fatal(err)
		}
	}
	if sc.every == 0 {
		waitSubmitted()
	}

	deadline := sc.deadline
	if deadline == 0 {
		deadline = 2*time.Minute + time.Duration(n)*50*time.Millisecond
	}
	w := &watch{c: c, total: n, deadline: start.Add(time.Duration(n)*sc.every + deadline)}
	if sc.inject != nil {
		sc.inject(c, w) // it returns after its last fault, before the last task ends
	}
	if sc.every > 0 {
		waitSubmitted()
	}
	c.waitFor(fmt.Sprintf("all %d tasks finished within %s of the last submit", n, deadline), time.Until(w.deadline),
		func() bool { return w.finished() == n })
	rep.run = time.Since(start)

	c.verify(t, sc, ids, &rep)
	c.verifyStore(t, rep.byState)
	t.Logf("faults seen: %s", c.evidence())
	c.checkResources(t, base)
	lines := c.assertNoTokenLogged()
	t.Logf("%d tasks: submitted in %s, all ended %s after the first submit (%.0f tasks/s); by state %v; slowest task %s; %d log lines scanned for tokens",
		n, rep.submit.Round(time.Millisecond), rep.run.Round(time.Millisecond), float64(n)/rep.run.Seconds(),
		rep.byState, rep.maxTask.Round(time.Millisecond), lines)
	return c
}

// verifyStore checks that the tasks are where the cluster's store keeps them, and
// only there: in Badger, the orchestrator's data dir holds its tasks; in
// JetStream, it holds none, and the stream holds a record of every task, in the
// state the API gave (byState counts those).
func (c *cluster) verifyStore(t *testing.T, byState map[string]int) {
	t.Helper()
	_, err := os.Stat(filepath.Join(c.orchDataDir(), "tasks"))
	if c.store != orchestrator.StoreJetStream {
		if err != nil {
			t.Errorf("the Badger store is not in the orchestrator's data dir: %v", err)
		}
		return
	}
	if err == nil {
		t.Errorf("the orchestrator made a Badger store in %s with store.kind jetstream", c.orchDataDir())
	}
	js, err := jetstream.New(c.connect(broker.Identity{Role: broker.RoleStore}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.Stream(ctx, "CHIFFON_TASKS")
	if err != nil {
		t.Fatalf("the task stream: %v", err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(broker.Subjects{}.Store()+".t.*"))
	if err != nil {
		t.Fatalf("the task stream: %v", err)
	}
	stored := map[string]int{}
	for subject := range info.State.Subjects {
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			t.Fatalf("read %s: %v", subject, err)
		}
		var rec task.Task
		if err := json.Unmarshal(msg.Data, &rec); err != nil {
			t.Fatalf("record on %s: %v", subject, err)
		}
		stored[string(rec.State)]++
	}
	if !maps.Equal(stored, byState) {
		t.Errorf("the task stream holds tasks by state %v, the API gave %v", stored, byState)
	}
}

// submitAll submits n count tasks over 4 connections and returns their parameter
// n by task id.
func (c *cluster) submitAll(n int, sleep func(int) string) map[string]int {
	c.t.Helper()
	ids, err := c.submitPaced(context.Background(), n, sleep, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return ids
}

// submitPaced submits n count tasks over 4 connections, spaced by every (0: as fast
// as they go), until ctx ends, and returns their parameter n by task id. It may run
// on a goroutine of its own.
func (c *cluster) submitPaced(ctx context.Context, n int, sleep func(int) string, every time.Duration) (map[string]int, error) {
	ids := make(map[string]int, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				params := map[string]any{"n": i}
				if sleep != nil {
					if s := sleep(i); s != "" {
						params["sleep"] = s
					}
				}
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: params})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("submit task %d: %w", i, err)
					for range next {
					}
					return
				}
				mu.Lock()
				ids[tsk.ID] = i
				mu.Unlock()
			}
		}()
	}
	var tick <-chan time.Time
	if every > 0 {
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		tick = ticker.C
	}
feed:
	for i := range n {
		if tick != nil && i > 0 {
			select {
			case <-tick:
			case <-ctx.Done():
				break feed
			}
		}
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return ids, errors.Join(all...)
}

// runs counts, by request_id, how often the count work type started.
func (c *cluster) runs() map[string]int {
	c.t.Helper()
	runs := map[string]int{}
	f, err := os.Open(c.runsFile)
	if errors.Is(err, os.ErrNotExist) {
		return runs // nothing ran yet
	}
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		runs[strings.TrimSpace(sc.Text())]++
	}
	return runs
}

// verify checks the guarantees of docs/reliability.md on every task.
func (c *cluster) verify(t *testing.T, sc scenario, ids map[string]int, rep *report) {
	t.Helper()
	runs := c.runs()
	type checked struct {
		task   *task.Task
		output string
		err    error
	}
	results := make(chan checked)
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				tsk, err := c.client.Get(ctx, id)
				var out bytes.Buffer
				if err == nil && tsk.State == task.StateSucceeded {
					_, err = c.client.Output(ctx, id, &out)
				}
				cancel()
				results <- checked{tsk, out.String(), err}
			}
		}()
	}
	go func() {
		for id := range ids {
			work <- id
		}
		close(work)
		wg.Wait()
		close(results)
	}()
	known := map[string]bool{}
	bad := 0
	fail := func(format string, args ...any) {
		if bad++; bad <= 20 {
			t.Errorf(format, args...)
		}
	}
	for r := range results {
		if r.err != nil {
			fail("read task: %v", r.err)
			continue
		}
		tsk := r.task
		known[tsk.RequestID] = true
		rep.byState[string(tsk.State)]++
		if !tsk.State.Final() || tsk.FinishedAt == nil {
			fail("task %s is %s, not finished", tsk.ID, tsk.State)
			continue
		}
		from := tsk.CreatedAt
		if tsk.FirstDispatchAt != nil {
			from = *tsk.FirstDispatchAt
		}
		if d := tsk.FinishedAt.Sub(from); d > sc.bound {
			fail("task %s took %s from its first dispatch, over the bound of %s (attempts %d, retries %+v)", tsk.ID, d, sc.bound, tsk.Attempts, tsk.Retries)
		} else if d > rep.maxTask {
			rep.maxTask = d
		}
		ran := runs[tsk.RequestID]
		if ran > 1 {
			fail("task %s (request %s) ran %d times", tsk.ID, tsk.RequestID, ran)
		}
		switch {
		case tsk.State == task.StateSucceeded:
			want := fmt.Sprintf("out %d %s\n", ids[tsk.ID], tsk.RequestID)
			if ran != 1 || r.output != want || !tsk.OutputComplete || tsk.Result == nil || tsk.Result.ExitCode != 0 {
				fail("succeeded task %s: ran %d times, output %q (complete %v), want %q", tsk.ID, ran, r.output, tsk.OutputComplete, want)
			}
		case tsk.State == task.StateFailed && sc.interrupted && tsk.Result != nil && tsk.Result.ExitCode == 137:
			// The agent died while it ran: reported interrupted, never run again.
		default:
			fail("task %s ended %s: result %+v, error %+v, retries %+v", tsk.ID, tsk.State, tsk.Result, tsk.Error, tsk.Retries)
		}
	}
	for reqID, n := range runs {
		if !known[reqID] {
			fail("runs file names request %q (%d runs) that no task has", reqID, n)
		}
	}
	m, err := c.metrics()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, s := range task.States {
		got := int(m[`chiffon_orchestrator_tasks{state="`+string(s)+`"}`])
		sum += got
		if got != rep.byState[string(s)] {
			t.Errorf("metrics count %d %s tasks, the API %d", got, s, rep.byState[string(s)])
		}
	}
	if sum != len(ids) {
		t.Errorf("counts by state add up to %d, submitted %d", sum, len(ids))
	}
}

var metricLine = regexp.MustCompile(`^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$`)

// metrics scrapes the orchestrator's /metrics into name{labels} -> value.
func (c *cluster) metrics() (map[string]float64, error) {
	resp, err := c.http.Get("http://" + c.httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if g := metricLine.FindStringSubmatch(l); g != nil {
			v, _ := strconv.ParseFloat(g[2], 64)
			m[g[1]] = v
		}
	}
	return m, nil
}

// usage is one process's goroutines and resident memory.
type usage struct {
	pid        int
	goroutines int
	rssKiB     int
	heapKiB    int // Go heap in use; known for the orchestrator only
}

// resources measures the orchestrator and every agent that is running.
func (c *cluster) resources() map[string]usage {
	c.t.Helper()
	out := map[string]usage{}
	c.http.CloseIdleConnections()
	if m, err := c.metrics(); err == nil && c.orch.alive() {
		out["orchestrator"] = usage{pid: c.orch.pid(), goroutines: int(m["go_goroutines"]), rssKiB: rss(c.orch.pid()),
			heapKiB: int(m["go_memstats_heap_inuse_bytes"]) >> 10}
	}
	for id, p := range c.agents {
		if !p.alive() {
			continue
		}
		out[id] = usage{pid: p.pid(), goroutines: c.agentGoroutines(id, p), rssKiB: rss(p.pid())}
	}
	return out
}

// agentGoroutines asks an agent (built with chiffonfaults) for its goroutine count.
func (c *cluster) agentGoroutines(id string, p *proc) int {
	path := c.statsFile(id)
	_ = os.Remove(path)
	_ = p.cmd.Process.Signal(syscall.SIGUSR1)
	n := -1
	c.waitFor("goroutine count of "+id, 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		n, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return n
}

// rss reads VmRSS of pid in KiB.
func rss(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

// checkResources compares every process still running since base was taken with its
// numbers then: goroutines must come back near their idle count (polled, since tasks
// end asynchronously), and resident memory is reported.
func (c *cluster) checkResources(t *testing.T, base map[string]usage) {
	t.Helper()
	const slack = 10
	var now map[string]usage
	settled := func() bool {
		now = c.resources()
		for name, b := range base {
			if u, ok := now[name]; ok && u.pid == b.pid && u.goroutines > b.goroutines+slack {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // polling other processes; nothing to wait on
	}
	for name, b := range base {
		u, ok := now[name]
		if !ok || u.pid != b.pid {
			t.Logf("resources %s: restarted during the run (start: %d goroutines, %d MiB RSS)", name, b.goroutines, b.rssKiB>>10)
			continue
		}
		heap := ""
		if b.heapKiB > 0 {
			heap = fmt.Sprintf(", Go heap in use %d -> %d MiB", b.heapKiB>>10, u.heapKiB>>10)
		}
		t.Logf("resources %s: goroutines %d -> %d, RSS %d -> %d MiB%s", name, b.goroutines, u.goroutines, b.rssKiB>>10, u.rssKiB>>10, heap)
		if u.goroutines > b.goroutines+slack {
			t.Errorf("%s: %d goroutines after the run, %d before", name, u.goroutines, b.goroutines)
		}
		if u.rssKiB > b.rssKiB+256<<10 {
			t.Errorf("%s: RSS grew from %d to %d MiB", name, b.rssKiB>>10, u.rssKiB>>10)
		}
	}
}

// evidence summarizes what the faults did: the orchestrator's retries by code (since
// its last start), the attempts it queued again after "no responders" and the
// breakers it opened, and what the agents logged about duplicates and interrupted
// tasks.
func (c *cluster) evidence() string {
	var parts []string
	if m, err := c.metrics(); err == nil {
		for _, code := range []string{"5001", "5002", "5005"} {
			parts = append(parts, fmt.Sprintf("retries %s: %.0f", code, m[`chiffon_orchestrator_retries_total{code="`+code+`"}`]))
		}
	}
	needles := []logNeedle{
		noRespondersRequeued, {"orchestrator", "circuit breaker open"},
		{"code-", "duplicate of a running request"}, {"code-", "duplicate of a finished request"},
		{"code-", "answered as interrupted"}, {"code-", "request refused"},
	}
	for i, n := range c.logCounts(needles...) {
		parts = append(parts, fmt.Sprintf("%s: %d", needles[i].text, n))
	}
	return strings.Join(parts, "; ")
}

// logNeedle is a text to look for in the logs of the processes whose names start
// with process.
type logNeedle struct{ process, text string }

// noRespondersRequeued is what the orchestrator logs when an attempt got "no
// responders" and its task went back to the queue.
var noRespondersRequeued = logNeedle{"orchestrator", "attempt reached no agent: queued again"}

// logCounts counts the log lines that hold each needle.
func (c *cluster) logCounts(needles ...logNeedle) []int {
	counts := make([]int, len(needles))
	for file, ls := range c.logs() {
		for _, l := range ls {
			for i, n := range needles {
				if strings.HasPrefix(file, n.process) && strings.Contains(l, n.text) {
					counts[i]++
				}
			}
		}
	}
	return counts
}
