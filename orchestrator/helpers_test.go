package orchestrator_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/memstore"
	"github.com/chiffon-dev/chiffon/orchestrator/policy"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
	)
}

// wait bounds how long any one expected event may take.
const wait = 15 * time.Second

// syncBuf is a log sink tests can search.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is an embedded broker, an orchestrator config with fast timers, and tokens.
type env struct {
	t      *testing.T
	srv    *broker.Server
	cfg    orchestrator.Config
	tokens map[string]string // agent id -> token
	// orchTokens are the orchestrator's tokens, one per agent id.
	orchTokens map[string]string
	logs       *syncBuf
	// mem keeps the tasks in a fresh memstore, which a test can make fail its
	// writes, instead of the orchestrator's default Badger store in cfg.DataDir.
	mem bool
	// opened is set once an orchestrator has been opened on the env; o is the
	// last one.
	opened bool
	o      *orchestrator.Orchestrator
}

func newEnv(t *testing.T, agentIDs ...string) *env {
	return newStoreEnv(t, orchestrator.StoreBadger, agentIDs...)
}

// siteUsers makes an NKey for each identity and the broker user it is, with its
// allow lists as chiffon init writes them; seeds are in the order of ids.
func siteUsers(tb testing.TB, ids []broker.Identity) (seeds []string, users []broker.User) {
	tb.Helper()
	seeds = make([]string, len(ids))
	for i, id := range ids {
		var pub string
		seeds[i], pub = testnats.NKey(tb)
		p := broker.Subjects{}.Permissions(id, ids)
		users = append(users, broker.User{NKey: pub, Publish: p.Publish, Subscribe: p.Subscribe})
	}
	return seeds, users
}

// forEachStore runs fn as one subtest per kind of task store: the tests that
// restart an orchestrator prove each store keeps what a restart needs.
func forEachStore(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range []string{orchestrator.StoreBadger, orchestrator.StoreJetStream} {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

// newStoreEnv is newEnv with the tasks in a store of kind: for JetStream, the
// embedded broker runs JetStream.
func newStoreEnv(t *testing.T, kind string, agentIDs ...string) *env {
	srvCfg := broker.ServerConfig{}
	if kind == orchestrator.StoreJetStream {
		srvCfg = broker.ServerConfig{JetStream: true, StoreDir: testnats.StoreDir(t)}
	}
	e := &env{t: t, srv: testnats.Start(t, srvCfg), tokens: map[string]string{},
		orchTokens: map[string]string{}, logs: &syncBuf{}}
	e.cfg = orchestrator.Config{
		NATS:    broker.NATSConfig{URLs: []string{e.srv.ClientURL()}},
		DataDir: t.TempDir(), APIToken: broker.NewToken(),
		Timeouts: policy.TimeoutConfig{Ack: 2 * time.Second, Inactivity: 2 * time.Second,
			DeadlineGrace: 10 * time.Millisecond, Control: 2 * time.Second, InstanceProbe: 50 * time.Millisecond,
			Registration: time.Nanosecond}, // no wait for the agents: tests that want one set it
		Retry:   policy.RetryConfig{Initial: 10 * time.Millisecond, Max: time.Second},
		Breaker: policy.BreakerConfig{OpenFor: 300 * time.Millisecond},
		Store:   orchestrator.StoreConfig{Kind: kind},
	}
	for _, id := range agentIDs {
		e.tokens[id], e.orchTokens[id] = broker.NewToken(), broker.NewToken()
		e.cfg.Agents = append(e.cfg.Agents, policy.AgentConfig{ID: id, Type: envelope.Code,
			Token: e.tokens[id], OrchestratorToken: e.orchTokens[id]})
	}
	return e
}

// open starts an orchestrator on e.cfg and closes it when the test ends.
func (e *env) open() *orchestrator.Orchestrator {
	e.t.Helper()
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := orchestrator.Options{Logger: log}
	if e.mem {
		if e.opened {
			e.t.Fatal("a restart needs the tasks on disk: unset env.mem")
		}
		opts.Store = memstore.New(e.cfg.Retention)
	}
	o, err := orchestrator.Open(e.cfg, opts)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	if e.cfg.Store.Kind == orchestrator.StoreJetStream && orchestrator.StoreType(o) != "*jsstore.Store" {
		o.Close()
		e.t.Fatalf("store.kind jetstream opened a %s", orchestrator.StoreType(o))
	}
	e.t.Cleanup(func() { o.Close() })
	e.opened, e.o = true, o
	return o
}

// client serves o's API on an httptest server.
func (e *env) client(o *orchestrator.Orchestrator) *client.Client {
	srv := httptest.NewServer(o.Handler())
	e.t.Cleanup(srv.Close)
	hc := srv.Client()
	hc.Transport = checkAnswers(e.t, o.Handler(), hc.Transport) // each answer as openapi.json says
	return &client.Client{BaseURL: srv.URL, Token: e.cfg.APIToken, HTTP: hc}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitState waits until task id is in a final state and returns it.
func waitFinal(t *testing.T, o *orchestrator.Orchestrator, id string) *task.Task {
	t.Helper()
	var task *task.Task
	waitFor(t, "task "+id+" to finish", func() bool {
		var err error
		task, err = o.Task(id)
		return err == nil && task.State.Final()
	})
	return task
}

func submit(t *testing.T, o *orchestrator.Orchestrator, hints *task.Hints) *task.Task {
	t.Helper()
	task, err := o.Submit(context.Background(), api.SubmitRequest{ToAgent: envelope.Code, WorkType: "echo",
		Parameters: map[string]any{"text": "hi"}, Hints: hints})
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return task
}

// fakeAgent plays an agent over a raw NATS connection, faithful to docs/design.md,
// so tests can inject faults exactly.
type fakeAgent struct {
	t         *testing.T
	e         *env
	id, token string
	nc        *nats.Conn
	subj      broker.Subjects
	work      chan *workMsg
	control   chan *envelope.Envelope
	mu        sync.Mutex
	pingOK    bool
	cancelOK  bool
	onCancel  func(*envelope.Cancel)
	// registered is set once the orchestrator accepted the agent.
	registered atomic.Bool
	// instance is sent as the Chiffon-Instance header, when set.
	instance string
	// silent makes the agent answer no control message, as a hung process.
	silent bool
	// hbInterval is the heartbeat interval it registers with; 0 means a minute.
	hbInterval time.Duration
	// labels are the labels it registers with.
	labels map[string]string
}

// workMsg is one work_request the fake agent received.
type workMsg struct {
	env   *envelope.Envelope
	req   *envelope.WorkRequest
	reply string
	at    time.Time
}

func (e *env) fakeAgent(id string) *fakeAgent {
	e.t.Helper()
	a := &fakeAgent{t: e.t, e: e, id: id, token: e.tokens[id],
		nc:   testnats.ConnectWithInbox(e.t, e.srv, broker.Subjects{}.InboxOf(broker.Identity{Role: broker.RoleAgent, Name: id})),
		work: make(chan *workMsg, 64), control: make(chan *envelope.Envelope, 64), pingOK: true, cancelOK: true}
	return a
}

// listen subscribes to the agent's work and control subjects.
func (a *fakeAgent) listen() {
	a.t.Helper()
	_, err := a.nc.Subscribe(a.subj.AgentWork(a.id), func(m *nats.Msg) {
		env, err := envelope.Decode(m.Data)
		if err != nil || broker.CheckAuth(m, a.e.orchTokens[a.id]) != nil {
			a.t.Errorf("agent %s: bad work_request: %v", a.id, err)
			return
		}
		a.work <- &workMsg{env: env, req: env.Payload.(*envelope.WorkRequest), reply: m.Reply, at: time.Now()}
	})
	if err != nil {
		a.t.Fatal(err)
	}
	_, err = a.nc.Subscribe(a.subj.AgentControl(a.id), func(m *nats.Msg) {
		env, err := envelope.Decode(m.Data)
		if err != nil || env.Type == envelope.TypeDiscover {
			return
		}
		if env.Type != envelope.TypePing || a.registered.Load() {
			a.control <- env // not the ping that checks for another process at registration
		}
		if a.silent {
			return
		}
		a.mu.Lock()
		ack := &envelope.ControlAck{Command: env.Type, OK: a.pingOK, AgentStatus: envelope.AgentIdle}
		if c, ok := env.Payload.(*envelope.Cancel); ok {
			ack.OK = a.cancelOK
			if a.onCancel != nil {
				a.onCancel(c)
			}
		}
		a.mu.Unlock()
		a.respond(m.Reply, env.Reply(ack))
	})
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		a.t.Fatal(err)
	}
}

func (a *fakeAgent) respond(subject string, env *envelope.Envelope) {
	a.publishAs(subject, a.token, env)
}

func (a *fakeAgent) publishAs(subject, token string, env *envelope.Envelope) {
	data, err := envelope.Encode(env)
	if err != nil {
		a.t.Errorf("encode: %v", err)
		return
	}
	m := &nats.Msg{Subject: subject, Data: data}
	broker.SetAuth(m, token, a.id)
	if a.instance != "" {
		m.Header.Set(broker.HeaderInstance, a.instance)
	}
	// A handler may still answer while the test's cleanup closes the connection.
	if err := a.nc.PublishMsg(m); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		a.t.Errorf("publish: %v", err)
	}
}

// openWithAgent opens the orchestrator and registers a listening fake agent id with
// the given capacity.
func (e *env) openWithAgent(id string, capacity int) (*orchestrator.Orchestrator, *fakeAgent) {
	e.t.Helper()
	o := e.open()
	a := e.fakeAgent(id)
	a.listen()
	a.register(capacity)
	return o, a
}

// register registers the agent and returns the answer.
// offering are the work types it registers with, "echo" when none are given.
func (a *fakeAgent) registerAs(token string, capacity int, offering ...string) *envelope.Envelope {
	a.t.Helper()
	if len(offering) == 0 {
		offering = []string{"echo"}
	}
	hb := cmp.Or(a.hbInterval, time.Minute)
	reg := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Register{AgentID: a.id,
		SupportedVersions: []string{"1.0"}, WorkTypes: offering, MaxConcurrency: capacity, HeartbeatIntervalMS: hb.Milliseconds(), Labels: a.labels})
	data, _ := envelope.Encode(reg)
	m := &nats.Msg{Subject: a.subj.Register(a.id), Data: data}
	broker.SetAuth(m, token, a.id)
	if a.instance != "" {
		m.Header.Set(broker.HeaderInstance, a.instance)
	}
	rep, err := a.nc.RequestMsg(m, wait)
	if err != nil {
		a.t.Fatalf("register: %v", err)
	}
	env, err := envelope.Decode(rep.Data)
	if err != nil {
		a.t.Fatalf("register answer: %v", err)
	}
	return env
}

func (a *fakeAgent) register(capacity int) { a.registerOffering(capacity, "echo") }

// registerOffering is register for an agent that offers workTypes.
func (a *fakeAgent) registerOffering(capacity int, workTypes ...string) {
	a.t.Helper()
	if env := a.registerAs(a.token, capacity, workTypes...); env.Type != envelope.TypeRegisterAck {
		a.t.Fatalf("register: got %s %+v", env.Type, env.Payload)
	}
	a.registered.Store(true)
	// As an agent does once it is subscribed to its work subject: the
	// orchestrator routes work to it from this heartbeat on.
	a.heartbeat(capacity)
	if o := a.e.o; o != nil {
		waitFor(a.t, a.id+" online", func() bool {
			for _, info := range o.Agents() {
				if info.ID == a.id {
					return info.State == "online"
				}
			}
			return false
		})
	}
}

// heartbeat sends one heartbeat saying the agent is idle, with room for capacity
// tasks.
func (a *fakeAgent) heartbeat(capacity int) { a.heartbeatStatus(capacity, envelope.AgentIdle) }

// heartbeatStatus sends one heartbeat with the given status.
func (a *fakeAgent) heartbeatStatus(capacity int, status string) {
	hb := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Heartbeat{AgentID: a.id,
		Status: status, MaxConcurrency: capacity})
	a.publishAs(a.subj.Heartbeat(a.id), a.token, hb)
}

// next returns the next work_request.
func (a *fakeAgent) next() *workMsg {
	a.t.Helper()
	select {
	case w := <-a.work:
		return w
	case <-time.After(wait):
		a.t.Fatalf("agent %s: no work_request", a.id)
		return nil
	}
}

// nextControl returns the next control message.
func (a *fakeAgent) nextControl() *envelope.Envelope {
	a.t.Helper()
	select {
	case c := <-a.control:
		return c
	case <-time.After(wait):
		a.t.Fatalf("agent %s: no control message", a.id)
		return nil
	}
}

// status sends a work_status; offset < 0 leaves output_offset out.
func (a *fakeAgent) status(w *workMsg, percent int, step int64, output, chunk string, offset int64) {
	st := &envelope.WorkStatus{TaskID: w.req.TaskID, Status: envelope.StatusRunning, ProgressPercent: percent,
		Step: envelope.Step{Number: step, Name: "step", Output: output, OutputChunk: chunk}}
	env := w.env.Reply(st)
	if offset >= 0 {
		env.XCustomFields = map[string]any{"output_offset": offset}
	}
	a.respond(w.reply, env)
}

func (a *fakeAgent) ack(w *workMsg) { a.status(w, 0, 0, "", "", -1) }

// result sends a work_result; x sets x_custom_fields.
func (a *fakeAgent) result(w *workMsg, status string, code int64, output string, x map[string]any) {
	env := w.env.Reply(&envelope.WorkResult{TaskID: w.req.TaskID, Status: status, ExitCode: code, Output: output})
	env.XCustomFields = x
	a.respond(w.reply, env)
}

func (a *fakeAgent) fail(w *workMsg, e *errcodes.Error) {
	a.respond(w.reply, w.env.Reply(envelope.NewErrorPayload(e)))
}

func (a *fakeAgent) setPing(ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pingOK = ok
}

func natsMsg(a *fakeAgent, data []byte) *nats.Msg {
	m := &nats.Msg{Subject: a.subj.Register(a.id), Data: data}
	broker.SetAuth(m, a.token, a.id)
	return m
}
