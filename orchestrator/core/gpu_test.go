package core

// Where routing sends a task that needs GPU memory, as tables (the room of a
// GPU is orchestrator/gpuroom's, tested there). Routing runs on a core with no
// NATS and no loop: pick reads only the registry it is given.

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/sony/gobreaker/v2"
)

// gpu0 is GPU 0 with total and free MiB.
func gpu0(total, free int64) envelope.GPU {
	return envelope.GPU{Index: 0, Name: "NVIDIA H100", TotalMB: total, FreeMB: free}
}

// gpuAgent is an online, idle code agent offering echo with gpus.
func gpuAgent(id string, gpus ...envelope.GPU) *agentEntry {
	return &agentEntry{id: id, typ: envelope.Code, online: true, capacity: 4, status: envelope.AgentIdle,
		workTypes: []string{"echo"}, machineGPUs: gpus,
		breaker: gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Name: id})}
}

func routingCore(agents ...*agentEntry) *Core {
	o := &Core{agents: map[string]*agentEntry{}, byType: map[envelope.AgentType][]*agentEntry{}}
	for _, a := range agents {
		o.agents[a.id] = a
		o.byType[a.typ] = append(o.byType[a.typ], a)
	}
	return o
}

// gpuRun is a run of an echo task for code agents needing need MiB (0: none).
func gpuRun(id string, need int64) *run {
	t := &task.Task{ID: id, ToAgent: envelope.Code, WorkType: "echo"}
	if need > 0 {
		t.Hints = &task.Hints{GPUVRAMMB: &need}
	}
	return &run{t: t, log: slog.New(slog.DiscardHandler)}
}

func TestPickSendsAGPUTaskOnlyWhereAGPUHasRoom(t *testing.T) {
	busy := func(a *agentEntry) *agentEntry { a.inflight = a.capacity; return a }
	loaded := func(a *agentEntry) *agentEntry { a.inflight = 1; return a }
	cases := []struct {
		name   string
		agents []*agentEntry
		need   int64
		// want is the agent chosen; else queue, with why containing wantWhy; else
		// a 5005 at once.
		want, wantWhy string
		want5005      bool
	}{
		{"to the agent whose GPU has room, not the one with less", []*agentEntry{
			gpuAgent("small", gpu0(80, 2000)), loaded(gpuAgent("roomy", gpu0(81920, 40000)))}, 4096, "roomy", "", false},
		{"never to an agent without GPUs, however idle", []*agentEntry{
			gpuAgent("cpu"), loaded(gpuAgent("gpu", gpu0(81920, 8000)))}, 4096, "gpu", "", false},
		{"the least loaded of those with room", []*agentEntry{
			loaded(gpuAgent("a", gpu0(81920, 8000))), gpuAgent("b", gpu0(81920, 5000))}, 4096, "b", "", false},
		{"no room now: waits in the queue, saying why", []*agentEntry{
			gpuAgent("a", gpu0(81920, 1000)), gpuAgent("cpu")}, 4096, "", "the most: 1000 MiB, on a", false},
		{"room on a busy agent only: waits for its slot", []*agentEntry{
			busy(gpuAgent("a", gpu0(81920, 8000))), gpuAgent("b", gpu0(81920, 100))}, 4096, "", "", false},
		{"no GPU large enough: 5005 at once", []*agentEntry{
			gpuAgent("a", gpu0(2048, 2048)), gpuAgent("cpu")}, 4096, "", "", true},
		{"no agent with a GPU: 5005 at once", []*agentEntry{gpuAgent("cpu")}, 4096, "", "", true},
		{"no need: the least loaded, without a GPU too", []*agentEntry{
			loaded(gpuAgent("gpu", gpu0(81920, 8000))), gpuAgent("cpu")}, 0, "cpu", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := routingCore(tc.agents...).pick(gpuRun("t1", tc.need))
			switch {
			case tc.want != "":
				if res.agent == nil || res.agent.id != tc.want {
					t.Fatalf("got %+v, want agent %s", res, tc.want)
				}
			case tc.want5005:
				if res.err == nil || res.err.Code != errcodes.ResourceLimitExceeded || !res.failFast ||
					res.err.Context[errcodes.KeyLimitName] != envelope.LimitGPUVRAM {
					t.Fatalf("got %+v (err %v), want a 5005 for gpu_vram_mb at once", res, res.err)
				}
			default:
				if res.agent != nil || !res.queue || !strings.Contains(res.why, tc.wantWhy) {
					t.Fatalf("got %+v, want it queued saying %q", res, tc.wantWhy)
				}
			}
		})
	}
}

// TestTwoGPUTasksInARowDoNotShareRoomForOne: the first task's hold leaves the
// second none until a heartbeat shows the GPU with room again, or the first
// ends.
func TestTwoGPUTasksInARowDoNotShareRoomForOne(t *testing.T) {
	a := gpuAgent("a", gpu0(10000, 6000))
	o := routingCore(a)
	first, second := gpuRun("t1", 4000), gpuRun("t2", 4000)
	res := o.pick(first)
	if res.agent != a {
		t.Fatalf("first: %+v", res)
	}
	a.gpu.Hold(first.t.ID, a.gpus(), 4000) // as claim does
	if res := o.pick(second); res.agent != nil || !res.queue {
		t.Fatalf("second went out beside the first: %+v", res)
	}
	// A heartbeat that does not list the first yet frees nothing.
	a.machineGPUs = []envelope.GPU{gpu0(10000, 6000)}
	a.gpu.Reported(nil)
	if res := o.pick(second); res.agent != nil {
		t.Fatalf("a heartbeat made before the first reached the agent freed its memory: %+v", res)
	}
	// One that lists it, with its memory taken, leaves room for no second either.
	a.machineGPUs = []envelope.GPU{gpu0(10000, 2000)}
	a.gpu.Reported([]string{"t1"})
	if res := o.pick(second); res.agent != nil {
		t.Fatalf("second went out with 2000 MiB free: %+v", res)
	}
	// The other process on the GPU let go of its memory: room for the second.
	a.machineGPUs = []envelope.GPU{gpu0(10000, 6000)}
	a.gpu.Reported([]string{"t1"})
	if res := o.pick(second); res.agent != a {
		t.Fatalf("second still held back with room: %+v", res)
	}
	// Back to a GPU with only the first's memory taken: the first's end frees it
	// at once, and a heartbeat that still lists the first does not undo that.
	a.machineGPUs = []envelope.GPU{gpu0(10000, 2000)}
	a.gpu.Reported([]string{"t1"})
	a.releaseGPU(first, nil)
	if res := o.pick(second); res.agent != a {
		t.Fatalf("second held back after the first ended: %+v", res)
	}
}

// TestAnAgentsGPURefusalSendsTheRetryElsewhereUntilItsNextHeartbeat: a 5005
// for gpu_vram_mb from an agent caps its room below the need, so routing
// passes it over (or queues the task) until it heartbeats again.
func TestAnAgentsGPURefusalSendsTheRetryElsewhereUntilItsNextHeartbeat(t *testing.T) {
	a, b := gpuAgent("a", gpu0(81920, 80000)), gpuAgent("b", gpu0(81920, 9000))
	a.inflight = 0
	b.inflight = 1 // a would win on load
	o := routingCore(a, b)
	r := gpuRun("t1", 8192)
	if res := o.pick(r); res.agent != a {
		t.Fatalf("first attempt: %+v", res)
	}
	a.gpu.Hold(r.t.ID, a.gpus(), 8192)
	refusal := envelope.NewErrorPayload(errcodes.NewResourceLimitExceeded(envelope.LimitGPUVRAM, 1024, 8192)).Err()
	refusal.Context[errcodes.KeyAvailable] = json.Number("1024") // as decoded from the wire
	a.releaseGPU(r, refusal)
	if res := o.pick(r); res.agent != b {
		t.Fatalf("retry after the refusal: %+v, want agent b", res)
	}
	b.inflight = b.capacity
	if res := o.pick(r); res.agent != nil || !res.queue {
		t.Fatalf("retry with b full: %+v, want it queued", res)
	}
	a.gpu.Reported(nil) // its next heartbeat
	if res := o.pick(r); res.agent != a {
		t.Fatalf("after a's heartbeat: %+v, want agent a", res)
	}
	// Another 5005 (not for GPU memory) caps nothing.
	a.gpu.Hold(r.t.ID, a.gpus(), 8192)
	a.releaseGPU(r, errcodes.NewResourceLimitExceeded("max_concurrency", 0, 1))
	if res := o.pick(r); res.agent != a {
		t.Fatalf("after a 5005 for another limit: %+v, want agent a", res)
	}
}
