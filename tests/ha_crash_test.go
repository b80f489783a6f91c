package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
)

// answers records the status of every answer the API gave a client, and
// whether each 503 said when to retry.
type answers struct {
	mu       sync.Mutex
	statuses map[int]int
	bare503  int // 503s without Retry-After
	next     http.RoundTripper
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.statuses[resp.StatusCode]++
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		a.bare503++
	}
	a.mu.Unlock()
	return resp, nil
}

// load submits tasks, through every orchestrator in turn as a client given
// them all does, until stop is closed; the ids come on ids with their n.
type load struct {
	s       *haSite
	client  *client.Client
	answers *answers

	mu      sync.Mutex
	ids     map[string]int
	errs    []error
	stopped chan struct{}
	done    chan struct{}
}

func startLoad(s *haSite) *load {
	a := &answers{statuses: map[int]int{}, next: http.DefaultTransport}
	servers := make([]string, len(s.orchs))
	for i, o := range s.orchs {
		servers[i] = "http://" + o.addr
	}
	c := &client.Client{Servers: servers, Token: s.apiToken, HTTP: &http.Client{Transport: a, Timeout: time.Minute},
		Patience: time.Minute}
	l := &load{s: s, client: c, answers: a, ids: map[string]int{}, stopped: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// run submits one task every 50 ms, each of the count work type, every
// third sleeping a second, until stopped.
func (l *load) run() {
	defer close(l.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-l.stopped:
			return
		case <-tick.C:
		}
		params := map[string]any{"n": k}
		if k%3 == 0 {
			params["sleep"] = "1"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t, err := l.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "count", Parameters: params})
		cancel()
		l.mu.Lock()
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("task %d: %w", k, err))
		} else {
			l.ids[t.ID] = k
		}
		l.mu.Unlock()
	}
}

// submitted is how many tasks were submitted so far.
func (l *load) submitted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}

// stop ends the load and returns the tasks submitted.
func (l *load) stop() map[string]int {
	close(l.stopped)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids
}

// The NATS node that leads the task stream SIGKILLed under load, as a host
// crashes, then started again: with the default lease the leader keeps the
// lead, no submit is answered 500 (a 503 while the stream elects its new
// leader says when to retry, and the client does), no task spends a retry on
// 5002, and every task ends once, whole.
func TestHAStreamLeaderNodeCrashedUnderLoad(t *testing.T) {
	s := newHASiteOn(t, 2, 3, orchestrator.DefaultLease, startProcNodes)
	lead, _ := s.startGroup()
	leaderName := s.leaderName(lead)
	js := mustJetStream(t, s.connect())

	l := startLoad(s)
	s.waitFor("30 tasks submitted", time.Minute, func() bool { return l.submitted() >= 30 })
	node := s.streamLeader(js)
	if node < 0 {
		t.Fatal("no stream leader")
	}
	before := l.submitted()
	s.killNode(node)
	killed := time.Now()
	var next int
	s.waitFor("a new stream leader", time.Minute, func() bool {
		next = s.streamLeader(js)
		return next >= 0 && next != node
	})
	elected := time.Since(killed)
	s.waitFor("30 tasks submitted after the crash", 2*time.Minute, func() bool { return l.submitted() >= before+30 })
	s.startNode(node)
	s.waitFor("10 tasks submitted after the restart", time.Minute, func() bool { return l.submitted() >= before+40 })
	ids := l.stop()
	t.Logf("node-%d (the stream's leader) SIGKILLed after %d submits; node-%d led the stream %s later; %d tasks in all; answers by status: %v",
		node+1, before, next+1, elected.Round(time.Millisecond), len(ids), l.answers.statuses)

	for _, err := range l.errs {
		t.Errorf("submit failed: %v", err)
	}
	for code, n := range l.answers.statuses {
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Errorf("%d answers %d", n, code)
		}
	}
	if l.answers.bare503 > 0 {
		t.Errorf("%d answers 503 without Retry-After", l.answers.bare503)
	}
	now := s.leader(time.Minute)
	if got := s.leaderName(now); got != leaderName {
		t.Errorf("the crash cost the lead: %q leads, %q led before (lease %s)", got, leaderName, orchestrator.DefaultLease)
	}
	s.verify(now, ids)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := s.orchs[now].client.List(ctx, api.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range all {
		for _, r := range tk.Retries {
			if r.Code == int(errcodes.AgentUnavailable) {
				t.Errorf("task %s spent a retry on 5002: %s", tk.ID, r.Message)
			}
		}
	}
}
