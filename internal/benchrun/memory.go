package benchrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	files, err := writeSiteFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	nats := natsYAML(url, "chiffonidle"+randHex(4))
	orchCfg := orchestratorYAML(nats, filepath.Join(dir, "orchestrator"), "", files, []string{"idle-agent"})
	agentCfg := nats + fmt.Sprintf("id: idle-agent\ntype: infra\ntoken_file: %s\norchestrator_token_file: %s\ndata_dir: %s\n",
		files.agent, files.orch, filepath.Join(dir, "agent"))
	for name, body := range map[string]string{"orchestrator.yaml": orchCfg, "agent.yaml": agentCfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return 0, 0, err
		}
	}
	orch, err := startDaemon(ctx, cfg, "orchestrator running", nil, "orchestrator", "--config", filepath.Join(dir, "orchestrator.yaml"))
	if err != nil {
		return 0, 0, fmt.Errorf("orchestrator: %w", err)
	}
	defer orch.stop()
	ag, err := startDaemon(ctx, cfg, "registered", nil, "agent", "--config", filepath.Join(dir, "agent.yaml"))
	if err != nil {
		return 0, 0, fmt.Errorf("agent: %w", err)
	}
	defer ag.stop()
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	return procStatusMiB(ag.pid(), "VmRSS:"), procStatusMiB(orch.pid(), "VmRSS:"), nil
}
