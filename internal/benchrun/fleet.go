package benchrun

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/client"
)

// onlinePoll is how often the orchestrator's agent list is read while waiting for
// n agents to be online: 100 ms, and 200 µs more per agent, so that encoding the
// list (about 600 bytes an agent) does not become the orchestrator's main work.
func onlinePoll(n int) time.Duration {
	return 100*time.Millisecond + time.Duration(n)*200*time.Microsecond
}

// fleetRun is what RunAgents runs: the broker in this process, the orchestrator
// as a subprocess with its log followed, and the light agents.
type fleetRun struct {
	cfg     AgentsConfig
	srv     *broker.Server
	port    int // the broker's, kept across its restart
	orch    *daemon
	log     *orchLog
	agents  *lightAgents
	api     *client.Client
	apiDone func()
}

// startFleet starts the broker, the orchestrator configured for cfg.Agents
// agents, and the agents, and returns once the orchestrator lists them all
// online, with the time that took from the agents' start.
func startFleet(ctx context.Context, dir string, cfg AgentsConfig) (_ *fleetRun, took time.Duration, err error) {
	f := &fleetRun{cfg: cfg, log: newOrchLog()}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	if f.srv, err = broker.StartServer(broker.ServerConfig{}); err != nil {
		return nil, 0, err
	}
	f.port = f.srv.Port()
	files, err := writeSiteFiles(dir)
	if err != nil {
		return nil, 0, err
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	listen := "127.0.0.1:" + strconv.Itoa(apiPort)
	prefix := "chiffonagents" + randHex(4)
	ids := make([]string, cfg.Agents)
	for i := range ids {
		ids[i] = lightAgentID(i)
	}
	conf := filepath.Join(dir, "orchestrator.yaml")
	body := orchestratorYAML(natsYAML(f.srv.ClientURL(), prefix), filepath.Join(dir, "orchestrator"), listen, files, ids)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		return nil, 0, err
	}
	// At info level in JSON, whatever the caller's environment says: orchLog
	// reads the registrations from it.
	if f.orch, err = startDaemon(ctx, Config{Executable: cfg.Executable, ExecEnv: cfg.ExecEnv}, "orchestrator running",
		f.log.line, "orchestrator", "--log-format", "json", "--log-level", "info", "--config", conf); err != nil {
		return nil, 0, fmt.Errorf("orchestrator: %w", err)
	}
	token, err := broker.ReadTokenFile(files.api)
	if err != nil {
		return nil, 0, err
	}
	f.api, f.apiDone = apiClient("http://"+listen, token, cfg.InFlight)
	agentsDir := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agentsDir, 0o700); err != nil {
		return nil, 0, err
	}
	start := time.Now()
	f.log.mark(start)
	if f.agents, err = startLightAgents(cfg.Agents, f.srv.ClientURL(), prefix, agentsDir, files, cfg.Heartbeat); err != nil {
		return nil, 0, err
	}
	// The log first, which costs the orchestrator nothing more; then its list,
	// which says when the agents' first heartbeats have made them online.
	if _, err := f.log.waitRegistered(ctx, cfg.Agents, cfg.waitTimeout(), f.agents.errs); err != nil {
		return nil, 0, err
	}
	if _, _, err := f.waitOnline(ctx); err != nil {
		return nil, 0, err
	}
	return f, time.Since(start), nil
}

// waitOnline polls the orchestrator's agent list until it lists every agent
// online, and returns how many are and how many breakers are not closed then.
func (f *fleetRun) waitOnline(ctx context.Context) (online, notClosed int, err error) {
	timeout := f.cfg.waitTimeout()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(onlinePoll(f.cfg.Agents))
	defer tick.Stop()
	var last error
	for {
		infos, err := f.api.Agents(ctx)
		online, notClosed, last = 0, 0, err
		for _, a := range infos {
			if a.State == "online" {
				online++
			}
			if a.Breaker != "closed" {
				notClosed++
			}
		}
		if err == nil && online == f.cfg.Agents {
			return online, notClosed, nil
		}
		select {
		case <-tick.C:
		case err := <-f.agents.errs:
			return 0, 0, err
		case <-f.orch.done:
			return 0, 0, fmt.Errorf("the orchestrator exited")
		case <-deadline.C:
			return 0, 0, fmt.Errorf("%d of %d agents online after %s (last error: %v)", online, f.cfg.Agents, timeout, last)
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

// idle measures the orchestrator's CPU, and this process's, over
// cfg.IdleHeartbeats heartbeat intervals, after one of quiet for the
// registrations to settle.
func (f *fleetRun) idle(ctx context.Context) (IdleFigures, error) {
	hb := f.cfg.Heartbeat
	if err := sleepCtx(ctx, hb); err != nil {
		return IdleFigures{}, err
	}
	pids := []int{f.orch.pid(), os.Getpid()}
	before, err := cpuOf(pids)
	if err != nil {
		return IdleFigures{}, err
	}
	t0 := time.Now()
	gap, err := longestTickGap(ctx, time.Duration(f.cfg.IdleHeartbeats)*hb)
	if err != nil {
		return IdleFigures{}, err
	}
	after, err := cpuOf(pids)
	if err != nil {
		return IdleFigures{}, err
	}
	wall := time.Since(t0)
	return IdleFigures{WindowS: wall.Seconds(), OrchestratorCPUPct: cpuPercent(after[0]-before[0], wall),
		BenchCPUPct: cpuPercent(after[1]-before[1], wall), OrchestratorRSSMiB: procStatusMiB(pids[0], "VmRSS:"),
		BenchRSSMiB: procStatusMiB(pids[1], "VmRSS:"), LongestTickGapMS: float64(gap.Microseconds()) / 1e3}, nil
}

// stallTick is the period of the ticker whose longest gap tells a stall.
const stallTick = 100 * time.Millisecond

// longestTickGap waits d and returns the longest time between two ticks of a
// stallTick ticker meanwhile: far over stallTick when the machine stalled.
func longestTickGap(ctx context.Context, d time.Duration) (time.Duration, error) {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	end := time.NewTimer(d)
	defer end.Stop()
	var gap time.Duration
	last := time.Now()
	for {
		select {
		case now := <-tick.C:
			gap, last = max(gap, now.Sub(last)), now
		case <-end.C:
			return max(gap, time.Since(last)), nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// cpuOf is each process's CPU time so far.
func cpuOf(pids []int) ([]time.Duration, error) {
	out := make([]time.Duration, len(pids))
	for i, pid := range pids {
		var err error
		if out[i], err = processCPU(pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restart stops the broker, starts it again on the same port, and waits until
// every agent has registered again and the orchestrator lists them online.
func (f *fleetRun) restart(ctx context.Context) (RestartFigures, error) {
	opened, _ := f.log.counts()
	down := time.Now()
	f.srv.Shutdown()
	f.srv = nil
	f.log.mark(time.Now())
	srv, err := broker.StartServer(broker.ServerConfig{Port: f.port})
	if err != nil {
		return RestartFigures{}, fmt.Errorf("start the broker again on port %d: %w", f.port, err)
	}
	f.srv = srv
	up := time.Now()
	last, err := f.log.waitRegistered(ctx, f.cfg.Agents, f.cfg.waitTimeout(), f.agents.errs)
	if err != nil {
		return RestartFigures{}, err
	}
	online, notClosed, err := f.waitOnline(ctx)
	if err != nil {
		return RestartFigures{}, err
	}
	nowOpened, _ := f.log.counts()
	return RestartFigures{BrokerDownMS: float64(up.Sub(down).Microseconds()) / 1e3,
		ReregisterS: max(0, last.Sub(up).Seconds()), Reregistered: f.cfg.Agents, Online: online,
		BreakersOpened: nowOpened - opened, BreakersNotClosed: notClosed}, nil
}

// spread runs cfg.TasksPerAgent no-op tasks per agent through the API,
// cfg.InFlight at once, and counts the tasks each agent ran.
func (f *fleetRun) spread(ctx context.Context) (SpreadFigures, error) {
	opened, _ := f.log.counts()
	before := f.agents.counts()
	n := f.cfg.TasksPerAgent * f.cfg.Agents
	req := noopRequest(0)
	st, err := measure(ctx, n, f.cfg.InFlight, func(int) error { return apiTask(ctx, f.api, req) })
	if err != nil {
		return SpreadFigures{}, err
	}
	ran := f.agents.counts()
	for i := range ran {
		ran[i] -= before[i]
	}
	nowOpened, _ := f.log.counts()
	return SpreadFigures{Tasks: n, TasksPerS: st.perSecond, Spread: spreadOf(ran), BreakersOpened: nowOpened - opened}, nil
}

// stop stops the agents, the orchestrator and the broker, whichever run.
func (f *fleetRun) stop() {
	if f.agents != nil {
		f.agents.stop()
	}
	if f.apiDone != nil {
		f.apiDone()
	}
	if f.orch != nil {
		f.orch.stop()
	}
	if f.srv != nil {
		f.srv.Shutdown()
	}
}

// freePort is a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// sleepCtx waits d, or less if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
