package benchrun

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
)

// siteFiles are the token files of the bench's chiffon subprocesses: the API's,
// and one pair that every agent of a run shares.
type siteFiles struct {
	api, agent, orch string
}

// writeSiteFiles writes fresh tokens into dir.
func writeSiteFiles(dir string) (siteFiles, error) {
	f := siteFiles{api: filepath.Join(dir, "api.token"), agent: filepath.Join(dir, "agent.token"),
		orch: filepath.Join(dir, "orch.token")}
	for _, name := range []string{f.api, f.agent, f.orch} {
		if err := broker.WriteTokenFile(name, broker.NewToken()); err != nil {
			return f, err
		}
	}
	return f, nil
}

// natsYAML is the nats section of a daemon's config: url, under prefix.
func natsYAML(url, prefix string) string {
	return fmt.Sprintf("nats:\n  urls: [%q]\n  prefix: %s\n", url, prefix)
}

// orchestratorYAML is the config of a `chiffon orchestrator` on nats (natsYAML),
// its data in dataDir, its API on listen ("" for a free port it does not tell),
// with the infra agents ids, all of them with files' tokens.
func orchestratorYAML(nats, dataDir, listen string, f siteFiles, ids []string) string {
	var b strings.Builder
	b.WriteString(nats)
	fmt.Fprintf(&b, "api_token_file: %s\ndata_dir: %s\nhttp:\n  listen: %s\nagents:\n",
		f.api, dataDir, cmp.Or(listen, "127.0.0.1:0"))
	for _, id := range ids {
		fmt.Fprintf(&b, "  - id: %s\n    type: infra\n    token_file: %s\n    orchestrator_token_file: %s\n",
			id, f.agent, f.orch)
	}
	return b.String()
}

// daemon is a chiffon subprocess.
type daemon struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startDaemon runs cfg.Executable with args and waits until a line of its stderr
// contains ready. onLine, when not nil, is given every line of its stderr, on
// the goroutine that reads them, until it exits.
func startDaemon(ctx context.Context, cfg Config, ready string, onLine func(string), args ...string) (*daemon, error) {
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
		sc.Buffer(nil, 1<<20)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), ready) {
				close(found)
				signalled = true
			}
			if onLine != nil {
				onLine(sc.Text())
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

// pid is the subprocess's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

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
