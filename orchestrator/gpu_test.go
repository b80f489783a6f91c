package orchestrator_test

// GPU work end to end over an embedded broker: the hint in the API, the agents'
// GPUs, routing by GPU room, the queue wait and the GPUs a result names.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// h100 is GPU 0 of 80 GiB with free MiB free.
func h100(free int64) envelope.GPU {
	return envelope.GPU{Index: 0, UUID: "GPU-1234", Name: "NVIDIA H100 80GB HBM3", TotalMB: 81920, FreeMB: free}
}

// heartbeatGPUs sends a heartbeat reporting gpus and the tasks active, and
// waits until the orchestrator shows the GPUs' free memory: the queue has been
// routed again by then.
func (a *fakeAgent) heartbeatGPUs(o *orchestrator.Orchestrator, capacity int, gpus []envelope.GPU, active ...string) {
	a.t.Helper()
	hb := envelope.New(envelope.Code, envelope.Orchestrator, "", "", &envelope.Heartbeat{AgentID: a.id,
		Status: envelope.AgentIdle, MaxConcurrency: capacity, ActiveTaskIDs: active,
		Resources: &envelope.Resources{GPUVRAMMB: 81920}})
	hb.XCustomFields = envelope.PutGPUs(nil, gpus)
	a.publishAs(a.subj.Heartbeat(a.id), a.token, hb)
	waitFor(a.t, a.id+"'s GPUs", func() bool {
		for _, info := range o.Agents() {
			if info.ID == a.id {
				return slices.Equal(info.GPUs, gpus)
			}
		}
		return false
	})
}

func submitGPU(t *testing.T, o *orchestrator.Orchestrator, need int64) *task.Task {
	t.Helper()
	return submit(t, o, &task.Hints{GPUVRAMMB: &need})
}

// stillPending fails unless task id waits, never dispatched.
func stillPending(t *testing.T, o *orchestrator.Orchestrator, id string) {
	t.Helper()
	if tk, err := o.Task(id); err != nil || tk.State != task.StatePending || tk.Attempts != 0 {
		t.Fatalf("task %s: %+v, %v; want it pending, never dispatched", id, tk, err)
	}
}

func TestGPUHintIsCheckedAtSubmitAndSentInTheWorkRequestsCustomFields(t *testing.T) {
	e := newEnv(t, "gpu-1")
	o, a := e.openWithAgent("gpu-1", 2)
	a.heartbeatGPUs(o, 2, []envelope.GPU{h100(81920)})
	c := e.client(o)
	for _, tc := range []struct{ name, value, want string }{
		{"zero", "0", "leave it out"},
		{"negative", "-1", "must be an integer from 1"},
		{"not a number", `"4 GiB"`, "must be an integer"},
		{"a fraction", "1.5", "must be an integer"},
		{"too large", "1099511627777", "must be an integer from 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, c, "POST", "/api/v1/tasks", e.cfg.APIToken,
				`{"to_agent":"code","work_type":"echo","hints":{"gpu_vram_mb":`+tc.value+`}}`)
			if status != 400 || !strings.Contains(body, `"field":"hints.gpu_vram_mb"`) || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s; want 400 naming hints.gpu_vram_mb, saying %q", status, body, tc.want)
			}
		})
	}
	status, body := call(t, c, "POST", "/api/v1/tasks", e.cfg.APIToken,
		`{"to_agent":"code","work_type":"echo","hints":{"gpu_vram_mb":4096}}`)
	if status != 201 || !strings.Contains(body, `"gpu_vram_mb":4096`) {
		t.Fatalf("%d %s", status, body)
	}
	w := a.next()
	if n, err := envelope.GPUNeed(w.env.XCustomFields); err != nil || n != 4096 {
		t.Fatalf("x_custom_fields %v: need %d, %v", w.env.XCustomFields, n, err)
	}
	if w.req.Hints != nil {
		t.Fatalf("the v1.0 hints carry %+v; the GPU need goes in x_custom_fields only", w.req.Hints)
	}
}

func TestAgentsListShowsTheirGPUs(t *testing.T) {
	e := newEnv(t, "gpu-1", "cpu-1")
	o, a := e.openWithAgent("gpu-1", 1)
	cpu := e.fakeAgent("cpu-1")
	cpu.listen()
	cpu.register(1)
	gpus := []envelope.GPU{h100(60000), {Index: 1, Name: "NVIDIA L4", TotalMB: 23034, FreeMB: 23000}}
	a.heartbeatGPUs(o, 1, gpus)
	agents, err := e.client(o).Agents(context.Background()) // each answer checked against openapi.json
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range agents {
		switch info.ID {
		case "gpu-1":
			if !slices.Equal(info.GPUs, gpus) || info.Resources == nil || info.Resources.GPUVRAMMB != 81920 {
				t.Fatalf("gpu-1: gpus %+v, resources %+v", info.GPUs, info.Resources)
			}
		case "cpu-1":
			if info.GPUs != nil {
				t.Fatalf("cpu-1 shows GPUs %+v", info.GPUs)
			}
		}
	}
}

// TestGPUTaskWaitsForRoomAndGoesWhenAHeartbeatShowsIt: a task whose need no GPU
// has room for now waits in the queue (not 5002), goes to neither the GPU agent
// nor the one without GPUs, and goes out when a heartbeat shows room; its result
// keeps the GPUs it ran on, named.
func TestGPUTaskWaitsForRoomAndGoesWhenAHeartbeatShowsIt(t *testing.T) {
	e := newEnv(t, "gpu-1", "cpu-1")
	o, a := e.openWithAgent("gpu-1", 2)
	cpu := e.fakeAgent("cpu-1")
	cpu.listen()
	cpu.register(4)
	a.heartbeatGPUs(o, 2, []envelope.GPU{h100(1000)})
	tk := submitGPU(t, o, 4096)
	stillPending(t, o, tk.ID)
	h, err := o.History(tk.ID)
	if err != nil || !slices.ContainsFunc(h, func(ev *task.Event) bool {
		return strings.Contains(ev.Message, "queued: no GPU has the 4096 MiB of gpu_vram_mb free now (the most: 1000 MiB, on gpu-1)")
	}) {
		t.Fatalf("history %v (%v) does not say why it waits", h, err)
	}
	a.heartbeatGPUs(o, 2, []envelope.GPU{h100(2000)}) // still too little
	stillPending(t, o, tk.ID)
	a.heartbeatGPUs(o, 2, []envelope.GPU{h100(50000)})
	w := a.next()
	if w.req.TaskID != tk.ID {
		t.Fatalf("got %s", w.req.TaskID)
	}
	a.ack(w)
	a.result(w, envelope.ResultSuccess, 0, "ok", map[string]any{
		envelope.KeyGPUs: []any{map[string]any{"index": 0, "uuid": "GPU-1234", "peak_vram_mb": 4000}}})
	final := waitFinal(t, o, tk.ID)
	want := []task.GPUUse{{Index: 0, UUID: "GPU-1234", Name: "NVIDIA H100 80GB HBM3", PeakMB: 4000}}
	if final.State != task.StateSucceeded || !slices.Equal(final.Result.GPUs, want) {
		t.Fatalf("%s, result %+v", final.State, final.Result)
	}
	select {
	case w := <-cpu.work:
		t.Fatalf("the agent without GPUs got %s", w.req.TaskID)
	default:
	}
}

// TestGPUTasksInARowDoNotBothGoToRoomForOne: the second of two tasks that fit
// the GPU's room only one at a time waits, through a heartbeat that shows the
// first's memory taken, until the first ends.
func TestGPUTasksInARowDoNotBothGoToRoomForOne(t *testing.T) {
	e := newEnv(t, "gpu-1")
	o, a := e.openWithAgent("gpu-1", 4)
	a.heartbeatGPUs(o, 4, []envelope.GPU{h100(6000)})
	first, second := submitGPU(t, o, 4000), submitGPU(t, o, 4000)
	w := a.next()
	if w.req.TaskID != first.ID {
		t.Fatalf("got %s", w.req.TaskID)
	}
	a.ack(w)
	stillPending(t, o, second.ID)
	a.heartbeatGPUs(o, 4, []envelope.GPU{h100(2000)}, first.ID) // the first holds its memory
	stillPending(t, o, second.ID)
	a.result(w, envelope.ResultSuccess, 0, "", nil)
	waitFinal(t, o, first.ID)
	if w2 := a.next(); w2.req.TaskID != second.ID {
		t.Fatalf("got %s, want the second task once the first ended", w2.req.TaskID)
	}
}

// TestAQueuedGPUTaskDoesNotWaitBehindALargerOne: when a heartbeat shows room
// for the smaller of two queued tasks of one work type, it goes, though the
// larger one before it still waits.
func TestAQueuedGPUTaskDoesNotWaitBehindALargerOne(t *testing.T) {
	e := newEnv(t, "gpu-1")
	o, a := e.openWithAgent("gpu-1", 4)
	a.heartbeatGPUs(o, 4, []envelope.GPU{h100(1000)})
	large, small := submitGPU(t, o, 8000), submitGPU(t, o, 2000)
	stillPending(t, o, small.ID)
	a.heartbeatGPUs(o, 4, []envelope.GPU{h100(3000)})
	if w := a.next(); w.req.TaskID != small.ID {
		t.Fatalf("got %s, want the small task", w.req.TaskID)
	}
	stillPending(t, o, large.ID)
}

// TestAGPURefusalRetriesOnAnotherAgentOrWaitsForRoom: an agent's 5005 for
// gpu_vram_mb is retried on the agent that has room; with no other, the retry
// waits for the refusing agent's next heartbeat instead of going back at once.
func TestAGPURefusalRetriesOnAnotherAgentOrWaitsForRoom(t *testing.T) {
	refusal := errcodes.NewResourceLimitExceeded(envelope.LimitGPUVRAM, 1024, 8192)
	t.Run("another agent has room", func(t *testing.T) {
		e := newEnv(t, "gpu-a", "gpu-b")
		o, a := e.openWithAgent("gpu-a", 2)
		b := e.fakeAgent("gpu-b")
		b.listen()
		b.register(2)
		a.heartbeatGPUs(o, 2, []envelope.GPU{h100(80000)})
		b.heartbeatGPUs(o, 2, []envelope.GPU{h100(70000)})
		tk := submitGPU(t, o, 8192)
		a.fail(a.next(), refusal) // equal load: gpu-a first, by id
		w := b.next()
		if w.req.TaskID != tk.ID {
			t.Fatalf("retry: %s", w.req.TaskID)
		}
		b.ack(w)
		b.result(w, envelope.ResultSuccess, 0, "", nil)
		final := waitFinal(t, o, tk.ID)
		if final.State != task.StateSucceeded || len(final.Retries) != 1 || final.Retries[0].AgentID != "gpu-a" || final.Retries[0].Code != 5005 {
			t.Fatalf("%s, retries %+v", final.State, final.Retries)
		}
	})
	t.Run("no other agent", func(t *testing.T) {
		e := newEnv(t, "gpu-a")
		o, a := e.openWithAgent("gpu-a", 2)
		a.heartbeatGPUs(o, 2, []envelope.GPU{h100(80000)})
		tk := submitGPU(t, o, 8192)
		a.fail(a.next(), refusal)
		waitFor(t, "the retry queued", func() bool {
			h, _ := o.History(tk.ID)
			return slices.ContainsFunc(h, func(ev *task.Event) bool { return strings.HasPrefix(ev.Message, "queued: no GPU has") })
		})
		if tk, _ := o.Task(tk.ID); tk.State != task.StatePending || tk.Attempts != 1 {
			t.Fatalf("after the refusal: %s, %d attempts", tk.State, tk.Attempts)
		}
		a.heartbeatGPUs(o, 2, []envelope.GPU{h100(79000)})
		if w := a.next(); w.req.TaskID != tk.ID {
			t.Fatalf("got %s", w.req.TaskID)
		}
	})
}

// TestAGPUNeedNoGPUCanHoldEndsAt5005: a need larger than every GPU of the
// agents that could take it ends the task at once: waiting makes no GPU larger.
func TestAGPUNeedNoGPUCanHoldEndsAt5005(t *testing.T) {
	e := newEnv(t, "gpu-1", "cpu-1")
	o, a := e.openWithAgent("gpu-1", 1)
	cpu := e.fakeAgent("cpu-1")
	cpu.listen()
	cpu.register(1)
	a.heartbeatGPUs(o, 1, []envelope.GPU{h100(81920)})
	final := waitFinal(t, o, submitGPU(t, o, 100000).ID)
	if final.State != task.StateError || final.Error.Code != 5005 || final.Error.Context[errcodes.KeyLimitName] != envelope.LimitGPUVRAM ||
		fmt.Sprint(final.Error.Context[errcodes.KeyAvailable]) != "81920" || final.Attempts != 0 {
		t.Fatalf("%s, %d attempts, error %+v", final.State, final.Attempts, final.Error)
	}
}

// TestAResultsMalformedGPUsAreIgnored: the task still ends, with no GPUs, and
// the log says why.
func TestAResultsMalformedGPUsAreIgnored(t *testing.T) {
	e := newEnv(t, "gpu-1")
	o, a := e.openWithAgent("gpu-1", 1)
	a.heartbeatGPUs(o, 1, []envelope.GPU{h100(81920)})
	tk := submitGPU(t, o, 1024)
	w := a.next()
	a.result(w, envelope.ResultSuccess, 0, "", map[string]any{envelope.KeyGPUs: "GPU 0"})
	if final := waitFinal(t, o, tk.ID); final.State != task.StateSucceeded || final.Result.GPUs != nil {
		t.Fatalf("%s, gpus %+v", final.State, final.Result.GPUs)
	}
	if !strings.Contains(e.logs.String(), "work_result's gpus ignored") {
		t.Fatal("no log line for the malformed gpus")
	}
}

// TestABatchCarriesTheGPUNeedToEachTask: a batch's hints reach each of its
// tasks, pinned to its agent.
func TestABatchCarriesTheGPUNeedToEachTask(t *testing.T) {
	e := newEnv(t, "gpu-1")
	o, a := e.openWithAgent("gpu-1", 1)
	a.heartbeatGPUs(o, 1, []envelope.GPU{h100(81920)})
	need := int64(2048)
	if _, err := o.CreateBatch(context.Background(), api.BatchRequest{ToAgent: envelope.Code, WorkType: "echo",
		Hints: &task.Hints{GPUVRAMMB: &need}}); err != nil {
		t.Fatal(err)
	}
	w := a.next()
	if n, _ := envelope.GPUNeed(w.env.XCustomFields); n != need {
		t.Fatalf("the batch's task asks for %d MiB", n)
	}
}
