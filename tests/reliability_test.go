package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// The reliability scenarios of docs/reliability.md. Each runs "count" tasks (a shell
// work type that records its request_id in a file before doing anything) across a
// real broker, orchestrator and agents, breaks something mid-run, and then checks:
// every task ended within its bound, no request ran twice, every succeeded task holds
// the output its run printed, and the counts by state add up. CHIFFON_SOAK=1 runs the
// large counts.

// sleepEvery gives every k-th task a SLEEP of d, so that tasks are running when a
// fault hits; the others run as fast as a shell starts.
func sleepEvery(k int, d string) func(int) string {
	return func(i int) string {
		if i%k == 0 {
			return d
		}
		return ""
	}
}

// killAgent kills agent id with SIGKILL and, down later, starts it again on the same
// data dir.
func killAgent(c *cluster, id string, down time.Duration) {
	c.agents[id].kill(c.t)
	time.Sleep(down) // the fault is the passing of time
	c.startAgent(id)
}

// restartBroker kills the broker with SIGKILL, starts it again on the same port down
// later, and waits until every agent has registered again.
func restartBroker(c *cluster, down time.Duration) {
	since := time.Now()
	c.broker.kill(c.t)
	time.Sleep(down) // the fault is the passing of time
	c.startBroker()
	for _, id := range c.agentIDs {
		c.waitAgentOnline(id, since)
	}
}

// restartOrchestrator kills the orchestrator with SIGKILL and starts it again on the
// same data dir.
func restartOrchestrator(c *cluster) {
	c.orch.kill(c.t)
	c.startOrchestrator()
}

// stallAgent stops agent id (SIGSTOP) for d, longer than the inactivity timeout, and
// lets it go on.
func stallAgent(c *cluster, id string, d time.Duration) {
	p := c.agents[id]
	p.suspend(c.t)
	time.Sleep(d) // the fault is the passing of time
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
}

func TestReliabilityAgentKilled(t *testing.T) {
	runScenarios(t, scenario{tasks: 200, soakTasks: 5000, agents: 3, sleep: sleepEvery(2, "0.2"),
		bound: time.Minute, interrupted: true,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.3)
			killAgent(c, "code-2", 0)
		}}, nil)
}

func TestReliabilityBrokerRestart(t *testing.T) {
	runScenarios(t, scenario{tasks: 200, soakTasks: 2000, agents: 3, sleep: sleepEvery(3, "0.1"),
		bound: time.Minute,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.25)
			restartBroker(c, 0)
			w.atFraction(0.6)
			restartBroker(c, 0)
		}}, nil)
}

func TestReliabilityOrchestratorRestart(t *testing.T) {
	runScenarios(t, scenario{tasks: 200, soakTasks: 2000, agents: 3, sleep: sleepEvery(3, "0.1"),
		bound: time.Minute,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.3)
			restartOrchestrator(c)
		}}, nil)
}

// TestReliabilityBlipsWithDefaultBreaker runs the orchestrator with the default
// breaker (5 failures, open for 60 s) and one agent, under a steady load, and cuts
// the agent for 2 s and the broker for 1.5 s. The agent is killed with a slot free,
// so that until the orchestrator misses its heartbeats, it sends the next tasks
// into the gap, where they get "no responders". Had those opened the breaker, the
// tasks routed while it was open would end 5002 with no attempt, or wait past the
// deadline, which a breaker open for a minute cannot meet.
func TestReliabilityBlipsWithDefaultBreaker(t *testing.T) {
	runScenarios(t, scenario{tasks: 300, soakTasks: 3000, agents: 1, sleep: sleepEvery(4, "0.2"),
		every: 40 * time.Millisecond, defaultBreaker: true, bound: 30 * time.Second, deadline: 30 * time.Second,
		interrupted: true,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.2)
			// Two slots free: one stays free for the next task however the kill
			// and the submits interleave, and that task goes into the gap.
			c.waitAgentSlots("code-1", 2)
			killAgent(c, "code-1", 2*time.Second)
			w.atFraction(0.6)
			restartBroker(c, 1500*time.Millisecond)
		}}, func(t *testing.T, c *cluster) {
		if n := c.logCounts(noRespondersRequeued)[0]; n == 0 {
			t.Error("no task was sent into a gap: the scenario did not test what it is for")
		}
	})
}

// TestReliabilityLossyNetwork also runs at debug log level and checks that no
// process logged a token (runScenario scans every log line of every process).
func TestReliabilityLossyNetwork(t *testing.T) {
	runScenarios(t, scenario{tasks: 200, soakTasks: 5000, agents: 3,
		faults: "drop_status=0.05,drop_result=0.05,dup_request=0.05", logLevel: "debug",
		bound: time.Minute}, nil)
}

func TestReliabilitySlowAgent(t *testing.T) {
	// Every third task runs past the inactivity timeout (only keepalives keep it
	// alive), and one agent is stopped outright for longer than that timeout.
	runScenarios(t, scenario{tasks: 60, soakTasks: 600, agents: 3,
		sleep: sleepEvery(3, "3"), // seconds, over relInactivity
		bound: time.Minute,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.2)
			stallAgent(c, "code-1", 2*relInactivity+time.Second)
		}}, nil)
}

func TestReliabilityAllAtOnce(t *testing.T) {
	runScenarios(t, scenario{tasks: 1000, soakTasks: 20000, agents: 3, sleep: sleepEvery(10, "0.2"),
		faults: "drop_status=0.05,drop_result=0.05,dup_request=0.05",
		bound:  2 * time.Minute, interrupted: true,
		inject: func(c *cluster, w *watch) {
			w.atFraction(0.1)
			killAgent(c, "code-3", 0)
			w.atFraction(0.25)
			restartBroker(c, 0)
			w.atFraction(0.4)
			restartOrchestrator(c)
			w.atFraction(0.55)
			stallAgent(c, "code-1", 2*relInactivity+time.Second)
			w.atFraction(0.7)
			restartBroker(c, 0)
			w.atFraction(0.85)
			killAgent(c, "code-2", 0)
		}}, nil)
}

// TestFaultHooksNotInProductionBuild checks that the binary built without the
// chiffonfaults tag holds none of the fault hooks.
func TestFaultHooksNotInProductionBuild(t *testing.T) {
	out, err := exec.Command("go", "tool", "nm", chiffonBin).Output()
	if err != nil {
		t.Fatal(err)
	}
	faults, err := exec.Command("go", "tool", "nm", faultsBinary(t)).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, sym := range []string{"orchestrator/core.parseFaultRates", "orchestrator/core.faultHit"} {
		if bytes.Contains(out, []byte(sym)) {
			t.Errorf("production binary holds %s", sym)
		}
		if !bytes.Contains(faults, []byte(sym)) {
			t.Errorf("chiffonfaults binary lacks %s: the check is looking for the wrong name", sym)
		}
	}
}

// TestReliabilityAgentKillEndsItsSubprocess kills an agent while a subprocess runs for
// it: the subprocess must die with the agent rather than run on unsupervised, and the
// restarted agent must report the request interrupted without running it again.
func TestReliabilityAgentKillEndsItsSubprocess(t *testing.T) {
	c := newCluster(t, 1)
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tsk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "hang",
		Parameters: map[string]any{"seconds": 120}})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	c.waitFor("the hang subprocess started", 20*time.Second, func() bool {
		pids = processesWithEnv("CHIFFON_REQUEST_ID=" + tsk.RequestID)
		return len(pids) > 0
	})
	killAgent(c, "code-1", 0)
	c.waitFor(fmt.Sprintf("subprocess %v gone with its agent", pids), 10*time.Second, func() bool {
		return len(processesWithEnv("CHIFFON_REQUEST_ID="+tsk.RequestID)) == 0
	})
	c.waitFor("task finished", time.Minute, func() bool {
		got, err := c.client.Get(ctx, tsk.ID)
		return err == nil && got.State.Final()
	})
	got, err := c.client.Get(ctx, tsk.ID)
	if err != nil || got.State != task.StateFailed || got.Result == nil || got.Result.ExitCode != 137 {
		t.Fatalf("task after its agent was killed: %+v, %v; want failed with exit code 137", got, err)
	}
}

// processesWithEnv lists the pids of this user's processes whose environment holds kv.
func processesWithEnv(kv string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, e := range bytes.Split(env, []byte{0}) {
			if string(e) == kv {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
