package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/agent/memcache"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildAgent())
	}
	goleak.VerifyTestMain(m,
		// Badger's and glog's package-level goroutines outlive any one DB.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
	)
}

// wait is how long any one expected event may take.
const wait = 20 * time.Second

// harness plays the orchestrator's side against one agent.
type harness struct {
	t          *testing.T
	srv        *broker.Server
	nc         *nats.Conn
	cfg        agent.Config
	orchToken  string
	agentToken string
	agent      *agent.Agent
	cancel     context.CancelFunc
	runErr     chan error
	inbox      atomic.Int64
	// refuse, when it holds a token status, makes registrations refused with it.
	refuse atomic.Value
	// gate, when it holds a channel, holds answers to registrations until it is
	// closed.
	gate atomic.Value
}

func newHarness(t *testing.T, mutate func(*agent.Config)) *harness {
	h := &harness{t: t, orchToken: broker.NewToken(), agentToken: broker.NewToken()}
	h.srv = testnats.Start(t, broker.ServerConfig{})
	h.nc = testnats.Connect(t, h.srv)
	h.cfg = agent.Config{
		ID: "code-1", Type: "code", NATS: broker.NATSConfig{URLs: []string{h.srv.ClientURL()}}, DataDir: t.TempDir(),
		Token: h.agentToken, OrchestratorToken: h.orchToken, MaxConcurrency: 4,
		KeepaliveInterval: agent.Duration(time.Second), DrainTimeout: agent.Duration(wait),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.acceptRegistrations()
	return h
}

// memCache is a dedupe cache in memory, which a test can make fail its writes
// (agent.BreakCacheWrites), for Config.DedupeCache; it is closed when the test ends.
// The agents a harness restarts share it, as they would share a data dir. Tests
// stay on the agent's Badger cache unless they need failing writes.
func memCache(t *testing.T) *memcache.Cache {
	c := memcache.New(agent.DefaultDedupeTTL)
	t.Cleanup(func() { c.Close() })
	return c
}

// acceptRegistrations answers every registration with a register_ack, as an
// orchestrator that knows the agent does (an agent takes work only once accepted),
// or with the 5004 h.refuse names.
func (h *harness) acceptRegistrations() {
	_, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(m *nats.Msg) {
		env, err := envelope.Decode(m.Data)
		if err != nil {
			return
		}
		if gate, ok := h.gate.Load().(chan struct{}); ok {
			<-gate
		}
		var ack *envelope.Envelope
		if status, _ := h.refuse.Load().(string); status != "" {
			ack = env.Reply(envelope.NewErrorPayload(errcodes.NewAuthenticationFailed(h.cfg.ID, status)))
		} else {
			ack = env.Reply(&envelope.RegisterAck{AgentID: h.cfg.ID, OrchestratorID: "o1", ProtocolVersion: "1.0"})
		}
		data, _ := envelope.Encode(ack)
		reply := &nats.Msg{Subject: m.Reply, Data: data}
		broker.SetAuth(reply, h.orchToken, h.cfg.ID)
		_ = h.nc.PublishMsg(reply)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// start runs a new agent on the harness's config; setup may add handlers.
func (h *harness) start(setup func(*agent.Agent)) {
	h.t.Helper()
	a, err := agent.New(h.cfg)
	if err != nil {
		h.t.Fatalf("agent.New: %v", err)
	}
	if setup != nil {
		setup(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.runErr = a, cancel, make(chan error, 1)
	go func() { h.runErr <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-h.runErr:
		h.t.Fatalf("agent.Run: %v", err)
	case <-time.After(wait):
		h.t.Fatal("agent not ready")
	}
	h.t.Cleanup(h.stop)
}

// stop cancels Run and waits for it to return.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.runErr:
		if err != nil {
			h.t.Errorf("agent.Run: %v", err)
		}
	case <-time.After(wait):
		h.t.Error("agent.Run did not return after cancel")
	}
}

// request builds a work_request envelope.
func (h *harness) request(workType string, params map[string]any, hints *envelope.Hints) *envelope.Envelope {
	return envelope.New(envelope.Orchestrator, envelope.AgentType(h.cfg.Type), "", "",
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: workType, Parameters: params, Hints: hints})
}

// send publishes env (re-encoded, with a fresh message_id) to the agent's work
// subject with a new reply subject, and returns a watch on that subject.
func (h *harness) send(env *envelope.Envelope) *watch {
	h.t.Helper()
	c := *env
	c.MessageID = envelope.NewID()
	data, err := envelope.Encode(&c)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.sendRaw(data, h.orchToken, env.Payload.(*envelope.WorkRequest).TaskID)
}

// sendRaw publishes data with the given token ("" for none) and watches the reply.
func (h *harness) sendRaw(data []byte, token, taskID string) *watch {
	h.t.Helper()
	if taskID == "" {
		taskID = envelope.NewID()
	}
	reply := broker.Subjects{}.OrchTask("orch"+string(rune('a'+h.inbox.Add(1)%26)), h.cfg.ID, taskID, broker.NewToken())
	w := h.watch(reply)
	msg := &nats.Msg{Subject: broker.Subjects{}.AgentWork(h.cfg.ID), Reply: reply, Data: data}
	if token != "" {
		broker.SetAuth(msg, token, h.cfg.ID)
	}
	if err := h.nc.PublishMsg(msg); err != nil {
		h.t.Fatal(err)
	}
	return w
}

// control sends a control message and returns the decoded answer.
func (h *harness) control(p envelope.Payload) *envelope.Envelope {
	h.t.Helper()
	env := envelope.New(envelope.Orchestrator, envelope.AgentType(h.cfg.Type), "", "", p)
	data, err := envelope.Encode(env)
	if err != nil {
		h.t.Fatal(err)
	}
	msg := &nats.Msg{Subject: broker.Subjects{}.AgentControl(h.cfg.ID), Data: data}
	broker.SetAuth(msg, h.orchToken, h.cfg.ID)
	reply, err := request(h, msg, broker.Subjects{}.Inbox(broker.RoleOrchestrator, ""), broker.Subjects{}.ControlReplies(h.cfg.ID), wait)
	if err != nil {
		h.t.Fatalf("control %s: %v", env.Type, err)
	}
	out, err := envelope.Decode(reply.Data)
	if err != nil {
		h.t.Fatalf("control reply: %v", err)
	}
	return out
}

// request sends msg as the orchestrator does, with a reply subject under
// replies (within inbox), and returns the first answer.
func request(h *harness, msg *nats.Msg, inbox, replies string, timeout time.Duration) (*nats.Msg, error) {
	r, err := broker.NewRequester(h.nc, inbox)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.Request(ctx, msg, replies)
}

// watch subscribes to a reply subject and collects what the agent sends there.
func (h *harness) watch(subject string) *watch {
	h.t.Helper()
	ch := make(chan *nats.Msg, 1<<12)
	sub, err := h.nc.ChanSubscribe(subject, ch)
	if err != nil {
		h.t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := h.nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &watch{h: h, ch: ch}
}

// watch is one reply subject's messages, with the output placed by output_offset.
type watch struct {
	h        *harness
	ch       chan *nats.Msg
	out      []byte
	statuses []*envelope.WorkStatus
	// bare is set once a message came without the agent's token (a 5004).
	bare bool
}

// next returns the next envelope, checking its auth and size. Only a 5004, the
// answer to a sender without the orchestrator's token, comes without the agent's
// token, and then with no credential at all (w.bare says so).
func (w *watch) next() *envelope.Envelope {
	w.h.t.Helper()
	select {
	case m := <-w.ch:
		if len(m.Data) > int(w.h.srv.MaxPayload()) {
			w.h.t.Fatalf("message of %d bytes is over max_payload", len(m.Data))
		}
		env, err := envelope.Decode(m.Data)
		if err != nil {
			w.h.t.Fatalf("agent sent an invalid envelope: %v", err)
		}
		if err := broker.CheckAuth(m, w.h.agentToken); err != nil {
			p, ok := env.Payload.(*envelope.ErrorPayload)
			if !ok || p.ErrorCode != int(errcodes.AuthenticationFailed) {
				w.h.t.Fatalf("agent message without its token: %v", err)
			}
			if len(m.Header) > 1 || m.Header.Get(broker.HeaderAuthorization) != "" || bytes.Contains(m.Data, []byte(w.h.agentToken)) ||
				bytes.Contains(m.Data, []byte(w.h.orchToken)) {
				w.h.t.Fatalf("a 5004 to an unauthenticated sender carries a credential: %v", m.Header)
			}
			w.bare = true
		}
		if st, ok := env.Payload.(*envelope.WorkStatus); ok {
			w.statuses = append(w.statuses, st)
			w.place(env, st)
		}
		return env
	case <-time.After(wait):
		w.h.t.Fatal("no message from the agent")
	}
	return nil
}

// place puts a status's output at its output_offset, failing on a gap.
func (w *watch) place(env *envelope.Envelope, st *envelope.WorkStatus) {
	if st.Step.Output == "" {
		return
	}
	n, ok := env.XCustomFields[output.KeyOffset].(json.Number)
	if !ok {
		w.h.t.Fatalf("status with output but no output_offset: %v", env.XCustomFields)
	}
	off, _ := n.Int64()
	if off > int64(len(w.out)) {
		w.h.t.Fatalf("output gap: offset %d, have %d", off, len(w.out))
	}
	end := off + int64(len(st.Step.Output))
	if end > int64(len(w.out)) {
		w.out = append(w.out[:off], st.Step.Output...)
	}
}

// first returns the first envelope, which must be an error, and its payload.
func (w *watch) errorReply() *envelope.ErrorPayload {
	w.h.t.Helper()
	env := w.next()
	p, ok := env.Payload.(*envelope.ErrorPayload)
	if !ok {
		w.h.t.Fatalf("want an error, got %s", env.Type)
	}
	return p
}

// waitOutput reads statuses until the output so far contains s.
func (w *watch) waitOutput(s string) {
	w.h.t.Helper()
	for !strings.Contains(string(w.out), s) {
		if env := w.next(); env.Type != envelope.TypeWorkStatus {
			w.h.t.Fatalf("want output %q, got %s", s, env.Type)
		}
	}
}

// result reads until the work_result and returns it with its envelope.
func (w *watch) result() (*envelope.WorkResult, *envelope.Envelope) {
	w.h.t.Helper()
	for {
		env := w.next()
		switch p := env.Payload.(type) {
		case *envelope.WorkResult:
			return p, env
		case *envelope.ErrorPayload:
			w.h.t.Fatalf("want a result, got error %d: %s", p.ErrorCode, p.ErrorMessage)
		}
	}
}

// blocker is a Go handler that writes "started", then waits for release.
type blocker struct {
	release chan struct{}
	runs    atomic.Int64
}

func newBlocker() *blocker { return &blocker{release: make(chan struct{})} }

func (b *blocker) handle(ctx context.Context, req *agent.Request, p agent.Progress) (agent.Result, error) {
	b.runs.Add(1)
	p.Step("working")
	_, _ = p.Write([]byte("started\n"))
	select {
	case <-b.release:
		return agent.Result{Output: "finished\n"}, nil
	case <-ctx.Done():
		return agent.Result{}, ctx.Err()
	}
}
