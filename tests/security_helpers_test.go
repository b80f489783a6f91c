package tests

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/nats-io/nats.go"
)

// What the security suite (security_test.go) and the bad-input test use to act
// as one identity of a cluster's site, and to check what the daemons answer.

// subj builds the subjects of every cluster (the default prefix).
var subj = broker.Subjects{}

// agentID is the identity of agent name.
func agentID(name string) broker.Identity { return broker.Identity{Role: broker.RoleAgent, Name: name} }

// testerID is the tester client identity, allowed to command every agent.
var testerID = broker.Identity{Role: broker.RoleClient, Name: testerClient}

// intruder is a raw nats.go connection as one identity of a cluster's site: what
// an attacker holding that identity's NKey seed can do.
type intruder struct {
	t    *testing.T
	name string
	nc   *nats.Conn
}

// dialAs connects once, with nats.go itself, to c's broker with the seed file
// (none if "") over TLS trusting caFile, with the inbox prefix inbox.
func (c *cluster) dialAs(seedFile, caFile, inbox string, opts ...nats.Option) (*nats.Conn, error) {
	tc, err := broker.ClientTLS{CAFile: caFile}.Config()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Secure(tc), nats.Name(c.t.Name()), nats.NoReconnect(),
		// Refusals are checked through LastError (see refused), not printed.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if seedFile != "" {
		opt, err := nats.NkeyOptionFromSeed(seedFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	return nats.Connect(c.natsURL(), opts...)
}

// intrude connects as id, as its daemon would, or fails the test.
func (c *cluster) intrude(id broker.Identity) *intruder {
	c.t.Helper()
	nc, err := c.dialAs(c.secret(seedName(id)), c.secret("ca.pem"), subj.InboxOf(id))
	if err != nil {
		c.t.Fatalf("connect as %s: %v", seedName(id), err)
	}
	c.t.Cleanup(nc.Close)
	return &intruder{t: c.t, name: seedName(id), nc: nc}
}

// refused runs op, which subscribes or publishes to subject (verb is
// "Subscription" or "Publish"), and checks that the broker refused it. The broker
// answers a violation with -ERR, before the PONG of the flush that follows, and
// nats.go keeps it as the connection's last error.
func (x *intruder) refused(verb, subject string, op func() error) {
	x.t.Helper()
	if err := op(); err != nil {
		x.t.Fatalf("%s: %s %s: %v", x.name, verb, subject, err)
	}
	if err := x.nc.Flush(); err != nil {
		x.t.Fatalf("%s: flush after %s %s: %v", x.name, verb, subject, err)
	}
	want := fmt.Sprintf("Permissions Violation for %s to %q", verb, subject)
	if err := x.nc.LastError(); err == nil || !strings.Contains(err.Error(), want) {
		x.t.Errorf("%s: %s to %s was not refused by the broker (last error: %v)", x.name, verb, subject, err)
	}
	if !x.nc.IsConnected() {
		x.t.Fatalf("%s: the connection closed after a refused %s", x.name, verb)
	}
}

// allowed runs op and checks that the broker did not refuse it.
func (x *intruder) allowed(verb, subject string, op func() error) {
	x.t.Helper()
	before := x.nc.LastError()
	if err := op(); err != nil {
		x.t.Fatalf("%s: %s %s: %v", x.name, verb, subject, err)
	}
	if err := x.nc.Flush(); err != nil {
		x.t.Fatalf("%s: flush: %v", x.name, err)
	}
	if after := x.nc.LastError(); after != nil && (before == nil || after.Error() != before.Error()) {
		x.t.Fatalf("%s: %s %s, which the identity needs, was refused: %v", x.name, verb, subject, after)
	}
}

// publish publishes msg, which the broker must refuse.
func (x *intruder) publishRefused(msg *nats.Msg) {
	x.t.Helper()
	x.refused("Publish", msg.Subject, func() error { return x.nc.PublishMsg(msg) })
}

// signed returns a message on subject holding env, with token and agent id headers.
func signed(t *testing.T, subject string, env *envelope.Envelope, token, agentID string) *nats.Msg {
	t.Helper()
	msg := &nats.Msg{Subject: subject, Data: encode(t, env)}
	broker.SetAuth(msg, token, agentID)
	return msg
}

// noResponders is a forged "no responders" status: what the NATS server sends on a
// request's reply subject when nobody subscribes to the request's subject.
func noResponders(subject string) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{"Status": []string{"503"}}}
}

// answerProblems lists what is wrong with resp, an answer to an unauthenticated
// message: it must be a 5004 with no Authorization header and no secret in its
// headers or body.
func answerProblems(resp *nats.Msg, secrets map[string]string) []string {
	var out []string
	if v, ok := resp.Header[broker.HeaderAuthorization]; ok {
		out = append(out, fmt.Sprintf("the answer has an Authorization header (%d values)", len(v)))
	}
	if s := headerSecret(resp.Header, secrets); s != "" {
		out = append(out, "a header of the answer holds "+s)
	}
	for s, v := range secrets {
		if strings.Contains(string(resp.Data), v) {
			out = append(out, "the answer holds "+s)
		}
	}
	if env, err := envelope.Decode(resp.Data); err != nil {
		out = append(out, fmt.Sprintf("the answer does not decode: %v", err))
	} else if p, ok := env.Payload.(*envelope.ErrorPayload); !ok || errcodes.Code(p.ErrorCode) != errcodes.AuthenticationFailed {
		out = append(out, fmt.Sprintf("answered %s, want 5004", resp.Data))
	}
	return out
}

// allSecrets are every secret of the site: tokens, NKey seeds, and each line of the
// CA's and the broker's private keys.
func (c *cluster) allSecrets() map[string]string {
	out := c.secrets()
	for _, f := range []string{"ca-key.pem", "server-key.pem"} {
		b, err := os.ReadFile(c.secret(f))
		if err != nil {
			c.t.Fatal(err)
		}
		for i, l := range strings.Split(string(b), "\n") {
			if len(l) >= 40 && !strings.HasPrefix(l, "-----") {
				out[fmt.Sprintf("%s line %d", f, i+1)] = l
			}
		}
	}
	return out
}

// agentsBreakers returns the breaker state of every agent the orchestrator lists.
func (c *cluster) agentsBreakers(ctx context.Context) map[string]string {
	c.t.Helper()
	as, err := c.client.Agents(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range as {
		out[a.ID] = a.Breaker
	}
	return out
}

// assertBreakersClosed fails the test when any agent's breaker is not closed.
func (c *cluster) assertBreakersClosed(ctx context.Context) {
	c.t.Helper()
	for id, b := range c.agentsBreakers(ctx) {
		if b != "closed" {
			c.t.Errorf("agent %s: breaker %s, want closed", id, b)
		}
	}
}

// waitTask waits until task id is in a final state and returns it.
func (c *cluster) waitTask(ctx context.Context, id string) *task.Task {
	c.t.Helper()
	var got *task.Task
	c.waitFor("task "+id+" finished", time.Minute, func() bool {
		var err error
		got, err = c.client.Get(ctx, id)
		return err == nil && got.State.Final()
	})
	return got
}

// output returns the output the orchestrator holds for task id.
func (c *cluster) output(ctx context.Context, id string) string {
	c.t.Helper()
	var b strings.Builder
	if _, err := c.client.Output(ctx, id, &b); err != nil {
		c.t.Fatal(err)
	}
	return b.String()
}

// exitOf waits up to d for p to exit and returns its exit code and log. A process
// still running after d fails the test and is killed, and the test goes on.
func (c *cluster) exitOf(p *proc, d time.Duration) (int, string) {
	c.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		c.t.Errorf("%s (pid %d) still runs after %s; killed", p.name, p.pid(), d)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.cmd.ProcessState.ExitCode(), strings.Join(c.logs()[p.name+".log"], "\n")
}

// headerSecret returns the name of the first secret any header value of h holds,
// or "".
func headerSecret(h nats.Header, secrets map[string]string) string {
	for _, vs := range h {
		for _, v := range vs {
			for name, secret := range secrets {
				if strings.Contains(v, secret) {
					return name
				}
			}
		}
	}
	return ""
}

// without returns m less the keys names.
func without(m map[string]string, names ...string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !slices.Contains(names, k) {
			out[k] = v
		}
	}
	return out
}

// forgers are the identities that try to pass for code-1 on its tasks: another
// agent, a client allowed to command code-1, and another holder of code-1's own
// NKey.
type forgers struct {
	c                    *cluster
	code1, code2, client *intruder
}

// forge sends every forgery against task, a task of code-1, and returns once the
// orchestrator has handled them all.
func (f forgers) forge(tsk *task.Task) {
	t, c := f.c.t, f.c
	t.Helper()
	result := envelope.New(envelope.Code, envelope.Orchestrator, tsk.RequestID, tsk.TraceID,
		&envelope.WorkResult{TaskID: tsk.ID, Status: envelope.ResultSuccess, Output: "forged output"})
	status := envelope.New(envelope.Code, envelope.Orchestrator, tsk.RequestID, tsk.TraceID,
		&envelope.WorkStatus{TaskID: tsk.ID, Status: "running", ProgressPercent: 99, Step: envelope.Step{Number: 9, Name: "forged step", Output: "forged output"}})
	// code-2 may publish on its own task inboxes only: with its own token, as
	// itself and as code-1, on any nonce.
	own := subj.OrchTask(clusterOrchID, "code-2", tsk.ID, envelope.NewID())
	for _, claim := range []string{"code-2", "code-1"} {
		for _, m := range []*nats.Msg{
			signed(t, own, result, c.agentToken("code-2"), claim),
			signed(t, own, status, c.agentToken("code-2"), claim),
			noResponders(own),
		} {
			if err := f.code2.nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	// code-1's task inboxes are closed to code-2 and to the client.
	theirs := subj.OrchTask(clusterOrchID, "code-1", tsk.ID, envelope.NewID())
	for _, x := range []*intruder{f.code2, f.client} {
		x.publishRefused(noResponders(theirs))
		x.publishRefused(signed(t, theirs, result, c.agentToken("code-2"), "code-1"))
	}
	// The client may command code-1, and names code-1's task inbox pattern, with
	// a made-up nonce, as the reply subject of a request of its own (another
	// request_id, as the client can neither know nor reuse the task's).
	fake := envelope.New(envelope.Orchestrator, envelope.Code, "", "",
		&envelope.WorkRequest{TaskID: tsk.ID, WorkType: "echo", Parameters: map[string]any{"message": "forged output"}})
	m := signed(t, subj.AgentWork("code-1"), fake, c.orchToken("code-1"), "code-1")
	m.Reply = theirs
	f.client.allowed("Publish", m.Subject, func() error { return f.client.nc.PublishMsg(m) })
	// Whoever else holds code-1's NKey (a second process, a task that read the
	// seed) may publish on code-1's task inboxes, but does not know the attempt's
	// nonce: its "no responders" is not the server's.
	if err := f.code1.nc.PublishMsg(noResponders(theirs)); err != nil {
		t.Fatal(err)
	}
	// The orchestrator handles its task inboxes' messages in the order each sender
	// sent them: once it answers an unauthenticated message from each forger, it
	// has handled every forgery before it.
	for _, x := range []struct {
		in      *intruder
		subject string
	}{{f.code2, own}, {f.code1, theirs}} {
		sentinel := &nats.Msg{Subject: x.subject, Data: []byte("{}")}
		broker.SetAuth(sentinel, "not-a-token", "code-1")
		if _, err := x.in.nc.RequestMsg(sentinel, 10*time.Second); err != nil {
			t.Fatalf("%s: the orchestrator did not answer after the forgeries: %v", x.in.name, err)
		}
	}
}

// assertRealOutcome waits for task, a count task with parameter n, and checks that
// it ran once on code-1 and succeeded at its first attempt with its real output,
// nothing forged in it, and every breaker closed.
func (c *cluster) assertRealOutcome(ctx context.Context, tsk *task.Task, n int) {
	c.t.Helper()
	got := c.waitTask(ctx, tsk.ID)
	out := c.output(ctx, tsk.ID)
	want := fmt.Sprintf("out %d %s\n", n, tsk.RequestID)
	if got.State != task.StateSucceeded || out != want || got.Attempts != 1 || len(got.Retries) != 0 || got.AgentID != "code-1" {
		c.t.Errorf("task %s after the forgeries: %s on %s, attempts %d, retries %+v, output %q; want succeeded on code-1 at the first attempt with %q",
			tsk.ID, got.State, got.AgentID, got.Attempts, got.Retries, out, want)
	}
	for _, s := range got.Steps {
		if strings.Contains(s.Name, "forged") {
			c.t.Errorf("task %s holds the forged step %+v", tsk.ID, s)
		}
	}
	if r := c.runs()[tsk.RequestID]; r != 1 {
		c.t.Errorf("task %s ran %d times", tsk.ID, r)
	}
	c.assertBreakersClosed(ctx)
}
