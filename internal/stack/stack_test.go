package stack

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"go.uber.org/goleak"
)

// Every test's stack must have stopped every goroutine it started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// handlers are the in-process work types of the test agents.
var handlers = map[string]agent.Handler{
	"greet": func(_ context.Context, req *agent.Request, p agent.Progress) (agent.Result, error) {
		_, err := p.Write([]byte("hello " + req.Parameters["name"].(string)))
		return agent.Result{}, err
	},
}

func TestStartedStackRunsTasksThroughTheOrchestratorAndTheAPI(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where the stack's own data dir goes
	ctx := context.Background()
	s, err := Start(ctx, Config{Agents: []Agent{
		{Config: agent.Config{ID: "code-a", Type: "code", Labels: map[string]string{"site": "attic", "gpu": "true"}}, Handlers: handlers},
		{Config: agent.Config{ID: "infra-a", Type: "infra"}, Handlers: handlers},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	if ids := s.AgentIDs(); strings.Join(ids, ",") != "code-a,infra-a" {
		t.Errorf("AgentIDs = %v", ids)
	}
	// Start returns once the orchestrator routes work to every agent.
	for _, a := range s.Orchestrator().Agents() {
		if a.State != "online" {
			t.Errorf("agent %s is %s when Start returns", a.ID, a.State)
		}
		// Labels travel in the registration.
		if want := map[string]string{"site": "attic", "gpu": "true"}; a.ID == "code-a" && !maps.Equal(a.Labels, want) ||
			a.ID == "infra-a" && a.Labels != nil {
			t.Errorf("agent %s has labels %v", a.ID, a.Labels)
		}
	}
	tsk, err := s.Orchestrator().Submit(ctx, api.SubmitRequest{ToAgent: envelope.Infra, WorkType: "greet",
		Parameters: map[string]any{"name": "infra"}})
	if err != nil {
		t.Fatal(err)
	}
	if tsk, err = s.Orchestrator().Wait(ctx, tsk.ID); err != nil || tsk.State != task.StateSucceeded {
		t.Fatalf("task through the orchestrator: %+v, %v", tsk, err)
	}

	c := &client.Client{BaseURL: s.APIURL(), Token: s.APIToken()}
	sub, err := c.Submit(ctx, api.SubmitRequest{ToAgent: envelope.Code, WorkType: "greet",
		Parameters: map[string]any{"name": "api"}})
	if err != nil {
		t.Fatalf("submit through the API at %s: %v", s.APIURL(), err)
	}
	if err := c.Events(ctx, sub.ID, func(*task.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, err := c.Output(ctx, sub.ID, &out); err != nil || out.String() != "hello api" {
		t.Fatalf("output through the API: %q, %v", out.String(), err)
	}
	if !strings.HasPrefix(s.NATSURL(), "nats://127.0.0.1:") {
		t.Errorf("NATSURL = %q, want the embedded broker", s.NATSURL())
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("Stop left the stack's temporary data dir: %v", entries)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

func TestStartFailsAndStopsWhatItStarted(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	greeter := Agent{Config: agent.Config{ID: "code-a", Type: "code"}, Handlers: handlers}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no agents", Config{}, "no agents"},
		{"an API address in use", Config{Agents: []Agent{greeter},
			Orchestrator: orchestrator.Config{HTTP: orchestrator.HTTPConfig{Listen: busy.Addr().String()}}}, "api listen"},
		{"an agent that cannot run", Config{Agents: []Agent{{Config: agent.Config{ID: "code-a", Type: "code",
			MetricsListen: busy.Addr().String()}}}}, "address already in use"},
		{"an agent the orchestrator does not know", Config{Agents: []Agent{greeter}, OnlineTimeout: time.Second,
			Orchestrator: orchestrator.Config{Agents: []policy.AgentConfig{{ID: "someone-else", Type: envelope.Code,
				Token: "0123456789abcdef0123456789abcdef", OrchestratorToken: "fedcba9876543210fedcba9876543210"}}}},
			"agents code-a not online: waited 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			s, err := Start(context.Background(), tc.cfg)
			if err == nil {
				s.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start: %v, want an error naming %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Errorf("a failed Start left its temporary data dir: %v", entries)
			}
		})
	}
}

func TestStopNowCancelsTheWorkAStopDrains(t *testing.T) {
	ctx := context.Background()
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	block := func(ctx context.Context, _ *agent.Request, _ agent.Progress) (agent.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return agent.Result{}, ctx.Err()
	}
	s, err := Start(ctx, Config{Agents: []Agent{{
		Config:   agent.Config{ID: "infra-a", Type: "infra", DrainTimeout: agent.Duration(time.Hour)},
		Handlers: map[string]agent.Handler{"block": block},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Orchestrator().Submit(ctx, api.SubmitRequest{ToAgent: envelope.Infra, WorkType: "block"}); err != nil {
		t.Fatal(err)
	}
	<-started
	stopped := make(chan error)
	go func() { stopped <- s.Stop() }() // drains: an hour for the running task
	s.StopNow()
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("StopNow did not cancel the running task")
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after StopNow")
	}
}

func TestErrDeliversTheFirstErrorOfADaemonThatStops(t *testing.T) {
	s := &Stack{errs: make(chan error, 1)}
	first, second := errors.New("first"), errors.New("second")
	for _, err := range []error{context.Canceled, first, second, nil} {
		s.goRun(func() error { return err })
		s.wg.Wait() // one after the other: none may block on errs
	}
	select {
	case err := <-s.Err():
		if err != first {
			t.Fatalf("Err delivered %v, want %v", err, first)
		}
	default:
		t.Fatal("Err delivered nothing")
	}
	select {
	case err := <-s.Err():
		t.Fatalf("Err delivered a second error: %v", err)
	default:
	}
}
