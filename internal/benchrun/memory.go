package benchrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
)

// idleSettle is how long an idle daemon runs after it is ready before its RSS is read.
const idleSettle = time.Second

// peakRSSMiB is this process's peak resident set (VmHWM), or 0 without /proc.
func peakRSSMiB() float64 { return procStatusMiB(os.Getpid(), "VmHWM:") }

// procStatusMiB reads a kB field of /proc/<pid>/status in MiB; 0 when unreadable.
func procStatusMiB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// idleRSS starts `chiffon orchestrator` and `chiffon agent` as subprocesses of
// cfg.Executable on url, under a subject prefix of their own, waits until the
// orchestrator runs and the agent has registered with it, lets them idle for
// idleSettle, and reads their VmRSS.
func idleRSS(ctx context.Context, url, dir string, cfg Config) (agentMiB, orchMiB float64, err error) {
	dir = filepath.Join(dir, "idle")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, 0, err
	}
	files := map[string]string{}
	for _, name := range []string{"orch", "agent", "api"} {
		files[name] = filepath.Join(dir, name+".token")
		if err := broker.WriteTokenFile(files[name], broker.NewToken()); err != nil {
			return 0, 0, err
		}
	}
	natsYAML := fmt.Sprintf("nats:\n  urls: [%q]\n  prefix: chiffonidle%s\n", url, randHex(4))
	orchCfg := natsYAML + fmt.Sprintf("api_token_file: %s\ndata_dir: %s\nhttp:\n  listen: 127.0.0.1:0\n"+
		"agents:\n  - id: idle-agent\n    type: infra\n    token_file: %s\n    orchestrator_token_file: %s\n",
		files["api"], filepath.Join(dir, "orchestrator"), files["agent"], files["orch"])
	agentCfg := natsYAML + fmt.Sprintf("id: idle-agent\ntype: infra\ntoken_file: %s\norchestrator_token_file: %s\ndata_dir: %s\n",
		files["agent"], files["orch"], filepath.Join(dir, "agent"))
	for name, body := range map[string]string{"orchestrator.yaml": orchCfg, "agent.yaml": agentCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return 0, 0, err
		}
	}
	orch, err := startDaemon(ctx, cfg, "orchestrator running", "orchestrator", "--config", filepath.Join(dir, "orchestrator.yaml"))
	if err != nil {
		return 0, 0, fmt.Errorf("orchestrator: %w", err)
	}
	defer orch.stop()
	ag, err := startDaemon(ctx, cfg, "registered", "agent", "--config", filepath.Join(dir, "agent.yaml"))
	if err != nil {
		return 0, 0, fmt.Errorf("agent: %w", err)
	}
	defer ag.stop()
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	return procStatusMiB(ag.cmd.Process.Pid, "VmRSS:"), procStatusMiB(orch.cmd.Process.Pid, "VmRSS:"), nil
}

// daemon is a chiffon subprocess.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon runs cfg.Executable with args and waits until a line of its stderr
// contains ready.
func startDaemon(ctx context.Context, cfg Config, ready string, args ...string) (*daemon, error) {
	cmd := exec.Command(cfg.Executable, args...)
	cmd.Env = append(os.Environ(), cfg.ExecEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, done: make(chan struct{})}
	found := make(chan struct{})
	var tail []string
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), ready) {
				close(found)
				signalled = true
			}
			tail = append(tail[max(0, len(tail)-9):], sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	select {
	case <-found:
		return d, nil
	case <-d.done:
		return nil, fmt.Errorf("exited before ready: %s", strings.Join(tail, "\n"))
	case <-time.After(20 * time.Second):
		d.stop()
		return nil, errors.New("not ready after 20s")
	case <-ctx.Done():
		d.stop()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM and waits; SIGKILL after 10 s.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}
