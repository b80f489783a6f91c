package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"go.yaml.in/yaml/v3"
)

// childEnv names the config file of an agent run by the test binary in a child
// process, so tests can SIGKILL or SIGTERM a real agent process.
const childEnv = "CHIFFON_TEST_AGENT_CONFIG"

func runChildAgent() int {
	cfg, err := agent.LoadConfig(os.Getenv(childEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := agent.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		<-a.Ready()
		fmt.Println("ready")
	}()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is an agent process.
type child struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild writes h.cfg as a YAML file and runs an agent process on it.
func (h *harness) startChild(workTypes map[string]agent.WorkTypeConfig) *child {
	h.t.Helper()
	dir := h.t.TempDir()
	tok, orch := filepath.Join(dir, "agent.token"), filepath.Join(dir, "orch.token")
	for p, v := range map[string]string{tok: h.agentToken, orch: h.orchToken} {
		if err := broker.WriteTokenFile(p, v); err != nil {
			h.t.Fatal(err)
		}
	}
	c := h.cfg
	c.Token, c.OrchestratorToken, c.TokenFile, c.OrchestratorTokenFile = "", "", tok, orch
	c.WorkTypes = workTypes
	b, err := yaml.Marshal(&c)
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	ch := &child{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
		ch.done <- cmd.Wait()
	}()
	h.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-ch.done
	})
	select {
	case <-ready:
	case err := <-ch.done:
		h.t.Fatalf("agent process ended: %v", err)
	case <-time.After(wait):
		h.t.Fatal("agent process not ready")
	}
	return ch
}

func (c *child) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(wait):
		t.Fatal("agent process did not exit")
	}
	return nil
}

// killGroupFromFile kills the process group whose leader's pid is in path.
func killGroupFromFile(path string) {
	b, err := os.ReadFile(path)
	if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func TestInterruptedTaskAfterAgentCrashGetsFailedResult(t *testing.T) {
	dir := t.TempDir()
	counter, pidFile := filepath.Join(dir, "counter"), filepath.Join(dir, "pid")
	wt := counterWorkType(counter)
	wt.Shell = `echo $$ > "$PIDFILE"; ` + wt.Shell + `; exec sleep 300`
	wt.SetEnv["PIDFILE"] = pidFile
	types := map[string]agent.WorkTypeConfig{"slow": wt}
	t.Cleanup(func() { killGroupFromFile(pidFile) }) // the orphan outlives the crash

	h := newHarness(t, nil)
	first := h.startChild(types)
	req := h.request("slow", nil, nil)
	h.send(req).waitOutput("run 1")
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	_ = first.wait(t)

	h.startChild(types)
	for i := range 2 { // the interrupted result is cached: a second duplicate replays it
		w := h.send(req)
		r, _ := w.result()
		if r.Status != envelope.ResultFailed || r.ExitCode != agent.ExitInterrupted || !strings.Contains(r.Output, "interrupted") {
			t.Fatalf("duplicate %d: %+v", i+1, r)
		}
	}
	if got := readCounter(t, counter); got != "1" {
		t.Fatalf("counter = %s: the task ran again", got)
	}
}

func TestSIGTERMDrainsAgentProcess(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	proc := h.startChild(map[string]agent.WorkTypeConfig{"wait_release": {
		Shell: `echo started; cat "$FIFO"; echo released`, SetEnv: map[string]string{"FIFO": fifo},
	}})
	w := h.send(h.request("wait_release", nil, nil))
	w.waitOutput("started")
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	// Wait until the agent reports draining, then check it refuses new work.
	for h.control(&envelope.Ping{}).Payload.(*envelope.ControlAck).AgentStatus != envelope.AgentDraining {
	}
	wantLimit(t, h.send(h.request("echo", map[string]any{"message": "x"}, nil)).errorReply(), agent.LimitDraining)
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, _ := w.result(); r.Status != envelope.ResultSuccess || !strings.HasSuffix(r.Output, "released\n") {
		t.Fatalf("running task after SIGTERM: %+v", r)
	}
	if err := proc.wait(t); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
}

func TestIdleAgentProcessStaysUnder64MiB(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.HeartbeatInterval = agent.Duration(100 * time.Millisecond) })
	proc := h.startChild(nil)
	if r, _ := h.send(h.request("echo", map[string]any{"message": "hello"}, nil)).result(); r.Output != "hello" {
		t.Fatalf("echo: %+v", r)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", proc.cmd.Process.Pid))
	if err != nil {
		t.Skip("no /proc:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			// 64 MiB is the budget of an agent built as it ships; the race
			// detector's shadow memory adds about half again, more under load
			// (chiffon bench's memory phase measures the shipped binary).
			limit := 64 << 10
			if raceDetector {
				limit = 96 << 10
			}
			t.Logf("idle agent RSS: %d KiB (%.1f MiB), race detector %v", kb, float64(kb)/1024, raceDetector)
			if kb > limit {
				t.Fatalf("idle agent RSS %d KiB is over %d MiB", kb, limit>>10)
			}
		}
	}
}
