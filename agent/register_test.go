package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/nats-io/nats.go"
)

// TestRefusedAgentTakesNoWorkAndStops: an agent the orchestrator refuses (another
// process with its id is live) never subscribes to its work subject, and Run
// returns the refusal.
func TestRefusedAgentTakesNoWorkAndStops(t *testing.T) {
	h := newHarness(t, nil)
	h.refuse.Store(errcodes.TokenInstanceLive)
	a, err := agent.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "registration refused") || !strings.Contains(err.Error(), errcodes.TokenInstanceLive) {
			t.Fatalf("Run = %v, want the refusal", err)
		}
	case <-time.After(wait):
		t.Fatal("a refused agent goes on running")
	}
	select {
	case <-a.Ready():
		t.Fatal("a refused agent said it was ready")
	default:
	}
}

// TestNoHeartbeatBeforeTheWorkSubscription: the orchestrator routes work to a new
// process from its first heartbeat, so none goes out while the registration waits
// for an answer, and the first one finds the work subject subscribed.
func TestNoHeartbeatBeforeTheWorkSubscription(t *testing.T) {
	const interval = 5 * time.Millisecond
	h := newHarness(t, func(c *agent.Config) { c.HeartbeatInterval = agent.Duration(interval) })
	hold := make(chan struct{})
	h.gate.Store(hold) // the harness's registry answers once hold is closed
	heartbeats := make(chan *nats.Msg, 256)
	sub, err := h.nc.Subscribe(broker.Subjects{}.Heartbeats(), func(m *nats.Msg) { heartbeats <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	registered := make(chan struct{}, 4)
	rsub, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(*nats.Msg) { registered <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer rsub.Unsubscribe()
	a, err := agent.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-registered:
	case <-time.After(wait):
		close(hold)
		t.Fatal("no registration")
	}
	// The fault is the passing of time: twenty heartbeat intervals unanswered.
	time.Sleep(20 * interval)
	select {
	case <-heartbeats:
		close(hold)
		t.Fatal("heartbeat sent before the registration was accepted")
	default:
	}
	close(hold)
	select {
	case <-heartbeats:
	case <-time.After(wait):
		t.Fatal("no heartbeat once accepted")
	}
	if err := requestEcho(h, wait); err != nil {
		t.Fatalf("work after the first heartbeat: %v", err)
	}
}

// TestNoWorkBeforeTheRegistrationIsAccepted: until the orchestrator answers, the
// agent is subscribed to its control subject (pings are answered, with its
// instance) but not to its work subject.
func TestNoWorkBeforeTheRegistrationIsAccepted(t *testing.T) {
	h := newHarness(t, nil)
	hold := make(chan struct{})
	h.gate.Store(hold) // the harness's registry answers once hold is closed
	registered := make(chan *nats.Msg, 4)
	sub, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(m *nats.Msg) { registered <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	a, err := agent.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	defer func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	}()
	var reg *nats.Msg
	select {
	case reg = <-registered:
	case <-time.After(wait):
		t.Fatal("no registration")
	}
	ping := h.control(&envelope.Ping{})
	if _, ok := ping.Payload.(*envelope.ControlAck); !ok {
		t.Fatalf("ping before acceptance: %s", ping.Type)
	}
	if err := requestEcho(h, time.Second); err != nats.ErrNoResponders {
		t.Fatalf("work before acceptance: %v, want no responders", err)
	}
	if broker.InstanceOf(reg) == "" {
		t.Fatal("registration without the process's instance header")
	}
	close(hold)
	select {
	case <-a.Ready():
	case <-time.After(wait):
		t.Fatal("not ready once accepted")
	}
}

// requestEcho sends an echo work_request to the agent's work subject, as the
// orchestrator does, and returns the error of waiting for its first answer.
func requestEcho(h *harness, timeout time.Duration) error {
	data, _ := envelope.Encode(h.request("echo", map[string]any{"message": "x"}, nil))
	msg := &nats.Msg{Subject: broker.Subjects{}.AgentWork(h.cfg.ID), Data: data}
	broker.SetAuth(msg, h.orchToken, h.cfg.ID)
	// A task inbox naming the agent: broker.Subjects.OrchTask, the nonce last.
	inbox := strings.TrimSuffix(broker.Subjects{}.OrchTasks("o-1"), ".>")
	_, err := request(h, msg, inbox, inbox+"."+h.cfg.ID+".t-1", timeout)
	if errors.Is(err, context.DeadlineExceeded) {
		err = nats.ErrTimeout
	}
	return err
}
