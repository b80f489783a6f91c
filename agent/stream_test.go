package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/chiffon-dev/chiffon/output"
	"github.com/nats-io/nats.go"
)

// treeWorkType starts a child and a grandchild that sleep, writes their pids, says
// "ready" and waits.
func treeWorkType(dir string) agent.WorkTypeConfig {
	return agent.WorkTypeConfig{
		Shell: `sleep 300 & echo $! > "$DIR/child"
sh -c 'sleep 300 & echo $! > "$DIR/grandchild"; wait' &
while [ ! -s "$DIR/grandchild" ]; do :; done
echo ready; wait`,
		SetEnv: map[string]string{"DIR": dir},
	}
}

// waitGone waits until the pids in dir's child and grandchild files are gone (or
// zombies, which no longer run).
func waitGone(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{"child", "grandchild"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		pid, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || err2 != nil {
			t.Fatalf("%s pid: %v %v", name, err, err2)
		}
		deadline := time.Now().Add(wait)
		for alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("%s %d still runs", name, pid)
			}
			time.Sleep(10 * time.Millisecond) // polling the kernel: there is no signal to wait on
		}
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestCancelKillsSubprocessTree(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, func(c *agent.Config) {
		c.WorkTypes = map[string]agent.WorkTypeConfig{"tree": treeWorkType(dir)}
	})
	h.start(nil)
	req := h.request("tree", nil, nil)
	w := h.send(req)
	w.waitOutput("ready")
	ack := h.control(&envelope.Cancel{TaskID: req.Payload.(*envelope.WorkRequest).TaskID}).Payload.(*envelope.ControlAck)
	if !ack.OK || ack.Command != envelope.TypeCancel {
		t.Fatalf("cancel ack: %+v", ack)
	}
	if r, _ := w.result(); r.Status != envelope.ResultCancelled || r.ExitCode != agent.ExitCancelled {
		t.Fatalf("result: %+v", r)
	}
	waitGone(t, dir)
	ack = h.control(&envelope.Cancel{TaskID: envelope.NewID()}).Payload.(*envelope.ControlAck)
	if ack.OK || ack.Message == "" {
		t.Fatalf("cancel of an unknown task: %+v", ack)
	}
}

func TestDeadlineKillsSubprocessTree(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, func(c *agent.Config) {
		c.WorkTypes = map[string]agent.WorkTypeConfig{"tree": treeWorkType(dir)}
	})
	h.start(nil)
	w := h.send(h.request("tree", nil, &envelope.Hints{MaxDurationSeconds: 1}))
	if r, _ := w.result(); r.Status != envelope.ResultFailed || r.ExitCode != agent.ExitDeadline {
		t.Fatalf("result: %+v", r)
	}
	waitGone(t, dir)
}

func TestTenMiBOutputArrivesWholeInChunks(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, func(c *agent.Config) {
		c.WorkTypes = map[string]agent.WorkTypeConfig{"big": {
			Shell:  `head -c 7864320 /dev/urandom | base64 | tee "$DIR/out"`,
			SetEnv: map[string]string{"DIR": dir},
		}}
	})
	h.start(nil)
	req := h.request("big", nil, nil)
	for _, pass := range []string{"live", "replay"} {
		w := h.send(req)
		r, env := w.result()
		want, err := os.ReadFile(filepath.Join(dir, "out"))
		if err != nil {
			t.Fatal(err)
		}
		if len(want) < 10<<20 || sha256.Sum256(w.out) != sha256.Sum256(want) {
			t.Fatalf("%s: streamed %d bytes, want %d equal bytes", pass, len(w.out), len(want))
		}
		total, _ := env.XCustomFields[output.KeyTotalBytes].(json.Number).Int64()
		if r.Status != envelope.ResultSuccess || env.XCustomFields[output.KeyTruncated] != true ||
			total != int64(len(want)) || !strings.HasSuffix(string(want), r.Output) {
			t.Fatalf("%s: result %s, fields %v", pass, r.Status, env.XCustomFields)
		}
		chunks := 0
		for _, st := range w.statuses {
			if st.Step.OutputChunk != "" {
				chunks++
			}
		}
		if pass == "replay" && chunks == 0 {
			t.Fatal("replay sent no chunks")
		}
		t.Logf("%s: %d statuses, %d chunks", pass, len(w.statuses), chunks)
	}
}

func TestLargeHandlerWriteIsChunked(t *testing.T) {
	h := newHarness(t, nil)
	big := strings.Repeat("é0123456789abcdef\n", 40000) // 760 000 bytes, two-byte runes
	h.start(func(a *agent.Agent) {
		a.Handle("big", func(_ context.Context, _ *agent.Request, p agent.Progress) (agent.Result, error) {
			_, err := p.Write([]byte(big))
			return agent.Result{}, err
		})
	})
	w := h.send(h.request("big", nil, nil))
	r, _ := w.result()
	if string(w.out) != big || r.Output != big {
		t.Fatalf("output: streamed %d, result %d, want %d", len(w.out), len(r.Output), len(big))
	}
	for _, st := range w.statuses {
		if st.Step.Output != "" && st.Step.OutputChunk == "" {
			t.Fatalf("unchunked status of %d bytes", len(st.Step.Output))
		}
	}
}

func TestDrainFinishesRunningWorkAndRefusesNew(t *testing.T) {
	h := newHarness(t, nil)
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
	w := h.send(h.request("block", nil, nil))
	w.waitOutput("started")
	h.cancel() // Run's context ends: the agent drains
	for h.control(&envelope.Ping{}).Payload.(*envelope.ControlAck).AgentStatus != envelope.AgentDraining {
	}
	wantLimit(t, h.send(h.request("echo", map[string]any{"message": "x"}, nil)).errorReply(), agent.LimitDraining)
	close(b.release)
	if r, _ := w.result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("running task: %+v", r)
	}
	select {
	case err := <-h.runErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("Run did not return after the drain")
	}
	h.cancel = nil
}

func TestBrokerRestartMidTaskReregistersAndCompletes(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.KeepaliveInterval = agent.Duration(10 * time.Second) })
	registered := make(chan string, 16)
	_, err := h.nc.Subscribe(broker.Subjects{}.Registers(), func(m *nats.Msg) {
		env, err := envelope.Decode(m.Data)
		if err != nil {
			t.Errorf("register: %v", err)
			return
		}
		registered <- env.Payload.(*envelope.Register).AgentID // the harness answers it
	})
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	h.start(func(a *agent.Agent) { a.Handle("block", b.handle) })
	waitRegistered(t, registered)
	w := h.send(h.request("block", nil, nil))
	w.waitOutput("started")

	h.srv = testnats.Restart(t, h.srv, broker.ServerConfig{})
	waitRegistered(t, registered) // the agent reconnected and registered again
	close(b.release)
	if r, _ := w.result(); r.Status != envelope.ResultSuccess || string(w.out) != "started\nfinished\n" {
		t.Fatalf("result after broker restart: %+v, output %q", r, w.out)
	}
}

func waitRegistered(t *testing.T, ch chan string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatal("agent did not register")
	}
}

// isAck reports whether env is the acknowledgement: step 0 "accepted" at 0%, no output.
func isAck(env *envelope.Envelope) bool {
	st, ok := env.Payload.(*envelope.WorkStatus)
	return ok && st.Step.Number == 0 && st.Step.Name == "accepted" && st.ProgressPercent == 0 &&
		st.Step.Output == "" && st.Status == envelope.StatusRunning
}

// TestAcknowledgementComesFirst checks the three ways the acknowledgement leaves: with
// the result of a task that ends at once, on its own while a silent handler runs, and
// before the first status of a handler that reports at once.
func TestAcknowledgementComesFirst(t *testing.T) {
	h := newHarness(t, nil)
	silent := make(chan struct{})
	b := newBlocker()
	h.start(func(a *agent.Agent) {
		a.Handle("quick", func(context.Context, *agent.Request, agent.Progress) (agent.Result, error) {
			return agent.Result{}, nil
		})
		a.Handle("silent", func(ctx context.Context, _ *agent.Request, _ agent.Progress) (agent.Result, error) {
			select {
			case <-silent:
				return agent.Result{}, nil
			case <-ctx.Done():
				return agent.Result{}, ctx.Err()
			}
		})
		a.Handle("blocker", b.handle)
	})

	t.Run("with the result", func(t *testing.T) {
		w := h.send(h.request("quick", nil, nil))
		if env := w.next(); !isAck(env) {
			t.Fatalf("first message %s is not the acknowledgement: %+v", env.Type, env.Payload)
		}
		if env := w.next(); env.Type != envelope.TypeWorkResult {
			t.Fatalf("after the acknowledgement: %s %+v", env.Type, env.Payload)
		}
	})
	t.Run("while the handler runs", func(t *testing.T) {
		w := h.send(h.request("silent", nil, nil))
		if env := w.next(); !isAck(env) { // the handler is still waiting for silent
			t.Fatalf("first message %s is not the acknowledgement: %+v", env.Type, env.Payload)
		}
		close(silent)
		if r, _ := w.result(); r.Status != envelope.ResultSuccess {
			t.Fatalf("result: %+v", r)
		}
	})
	t.Run("before the first status", func(t *testing.T) {
		w := h.send(h.request("blocker", nil, nil))
		if env := w.next(); !isAck(env) {
			t.Fatalf("first message %s is not the acknowledgement: %+v", env.Type, env.Payload)
		}
		w.waitOutput("started")
		if st := w.statuses[len(w.statuses)-1]; st.Step.Number != 1 || st.Step.Name != "working" {
			t.Fatalf("status after the acknowledgement: %+v", st.Step)
		}
		close(b.release)
		if r, _ := w.result(); r.Status != envelope.ResultSuccess {
			t.Fatalf("result: %+v", r)
		}
		if n := countAcks(w); n != 1 {
			t.Fatalf("%d acknowledgements", n)
		}
	})
}

// countAcks counts the acknowledgements: step 0 "accepted" running (the next step
// ends it with a step_completed, which is no acknowledgement).
func countAcks(w *watch) int {
	n := 0
	for _, st := range w.statuses {
		if st.Step.Number == 0 && st.Step.Name == "accepted" && st.Status == envelope.StatusRunning {
			n++
		}
	}
	return n
}
