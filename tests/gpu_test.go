package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// fakeGPU is a fake nvidia-smi for one agent, whose answers the test sets in
// files: the GPUs (index, uuid, name, total, free), and the memory each pid
// the agent's tasks wrote to "pids" holds on the GPU. It counts the samples
// it is asked for.
type fakeGPU struct {
	t    *testing.T
	dir  string
	uuid string
}

func newFakeGPU(t *testing.T, uuid string, totalMB, freeMB int) *fakeGPU {
	t.Helper()
	f := &fakeGPU{t: t, dir: t.TempDir(), uuid: uuid}
	f.put("nvidia-smi", `#!/bin/sh
d='`+f.dir+`'
case "$1" in
--query-gpu=*) exec cat "$d/gpus" ;;
--query-compute-apps=*)
  echo x >> "$d/samples"
  [ -f "$d/pids" ] || exit 0
  mem=$(cat "$d/mem" 2>/dev/null || echo 0)
  while read -r pid; do echo "$pid, `+uuid+`, $mem"; done < "$d/pids"
  exit 0 ;;
esac
exit 1
`)
	if err := os.Chmod(f.path(), 0o755); err != nil {
		t.Fatal(err)
	}
	f.setFree(totalMB, freeMB)
	return f
}

func (f *fakeGPU) path() string { return filepath.Join(f.dir, "nvidia-smi") }

// put replaces file name at once.
func (f *fakeGPU) put(name, text string) {
	f.t.Helper()
	tmp := filepath.Join(f.dir, "."+name)
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, name)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeGPU) setFree(totalMB, freeMB int) {
	f.put("gpus", fmt.Sprintf("0, %s, Fake GPU, %d, %d\n", f.uuid, totalMB, freeMB))
}

// samples is how many times the agent sampled the tasks' GPU memory.
func (f *fakeGPU) samples() int {
	b, _ := os.ReadFile(filepath.Join(f.dir, "samples"))
	return strings.Count(string(b), "x")
}

// holdMem makes the tasks' processes hold mb and waits until the agent has
// sampled that twice.
func (f *fakeGPU) holdMem(c *cluster, mb int) {
	f.put("mem", strconv.Itoa(mb)+"\n")
	n := f.samples()
	c.waitFor(fmt.Sprintf("two samples at %d MiB", mb), 30*time.Second, func() bool { return f.samples() >= n+2 })
}

// gpuJob is a work type that writes its pid where its agent's fake nvidia-smi
// reads it, prints the GPU it was given, and runs until its gate file exists.
func gpuJob(f *fakeGPU) string {
	return fmt.Sprintf(`  gpujob:
    shell: |
      echo "$$" >> %s/pids
      echo "cuda=$CUDA_VISIBLE_DEVICES"
      while [ ! -e "$CHIFFON_PARAM_GATE" ]; do sleep 0.05; done
    env: [PATH]
    schema:
      type: object
      properties:
        gate: {type: string}
`, f.dir)
}

// TestGPUJobsAcrossProcesses: real agents whose fake nvidia-smi reports one
// large GPU, one small GPU and none: a task needing 40 GiB goes to the large
// one (never the GPU-less agent), sees its GPU's UUID in CUDA_VISIBLE_DEVICES
// and reports the peak of its memory, not the last sample; a task no GPU has
// room for now waits, and goes once a heartbeat shows room; one no GPU is
// large enough for ends at once with 5005 naming gpu_vram_mb.
func TestGPUJobsAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3) // code-1 has the large GPU, code-2 the small one, code-3 none
	big := newFakeGPU(t, "GPU-big", 81920, 80000)
	small := newFakeGPU(t, "GPU-small", 16384, 16000)
	for id, f := range map[string]*fakeGPU{"code-1": big, "code-2": small, "code-3": nil} {
		smi, job := filepath.Join(t.TempDir(), "no-nvidia-smi"), gpuJob(&fakeGPU{dir: t.TempDir()})
		if f != nil {
			smi, job = f.path(), gpuJob(f)
		}
		c.writeAgentConfigAs(id+".yaml", id, "code", job)
		cfg, err := os.ReadFile(filepath.Join(c.dir, id+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c.write(id+".yaml", string(cfg)+fmt.Sprintf("gpu: {nvidia_smi: %s, sample_interval: 50ms}\n", smi))
	}
	c.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gates := t.TempDir()
	submit := func(name string, need int64) *task.Task {
		t.Helper()
		tk, err := c.client.Submit(ctx, api.SubmitRequest{ToAgent: "code", WorkType: "gpujob",
			Parameters: map[string]any{"gate": filepath.Join(gates, name)}, Hints: &task.Hints{GPUVRAMMB: &need}})
		if err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
		return tk
	}
	open := func(name string) {
		if err := os.WriteFile(filepath.Join(gates, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	end := func(tk *task.Task) *task.Task {
		t.Helper()
		c.waitFor("task "+tk.ID+" ended", time.Minute, func() bool {
			got, err := c.client.Get(ctx, tk.ID)
			if err == nil && got.State.Final() {
				tk = got
				return true
			}
			return false
		})
		return tk
	}

	a := submit("a", 40000)
	c.waitFor("task a running", time.Minute, func() bool {
		got, err := c.client.Get(ctx, a.ID)
		return err == nil && got.State == task.StateRunning
	})
	big.holdMem(c, 30000)
	big.holdMem(c, 500)
	open("a")
	a = end(a)
	var out strings.Builder
	if _, err := c.client.Output(ctx, a.ID, &out); err != nil {
		t.Fatal(err)
	}
	if a.State != task.StateSucceeded || a.AgentID != "code-1" || !strings.Contains(out.String(), "cuda=GPU-big") {
		t.Fatalf("task a: %s on %s, output %q; want it succeeded on code-1 with CUDA_VISIBLE_DEVICES=GPU-big", a.State, a.AgentID, out.String())
	}
	if r := a.Result; r == nil || r.ResourcesUsed == nil || r.ResourcesUsed.GPUVRAMMB != 30000 || len(r.GPUs) != 1 || r.GPUs[0].PeakMB != 30000 {
		t.Fatalf("task a's result %+v: want the peak, 30000 MiB, on its GPU", r)
	}

	// No GPU has 20000 MiB free now; small is too small for it.
	big.setFree(81920, 1000)
	c.waitFor("big's heartbeat showing 1000 MiB free", time.Minute, func() bool {
		info, ok := c.agentInfo("code-1")
		return ok && len(info.GPUs) == 1 && info.GPUs[0].FreeMB == 1000
	})
	b := submit("b", 20000)
	since := time.Now()
	c.waitFor("two heartbeats of big after the submit", time.Minute, func() bool {
		info, ok := c.agentInfo("code-1")
		return ok && info.LastHeartbeat != nil && info.LastHeartbeat.After(since.Add(2*relHeartbeat))
	})
	if got, err := c.client.Get(ctx, b.ID); err != nil || got.State != task.StatePending || got.Attempts != 0 {
		t.Fatalf("task b with no room anywhere: %+v, %v; want it waiting, never sent", got, err)
	}
	big.setFree(81920, 80000)
	open("b")
	if b = end(b); b.State != task.StateSucceeded || b.AgentID != "code-1" {
		t.Fatalf("task b once big had room: %s on %s", b.State, b.AgentID)
	}

	huge := submit("huge", 100000)
	if huge = end(huge); huge.State != task.StateError || huge.Error == nil || huge.Error.Code != int(errcodes.ResourceLimitExceeded) ||
		huge.Error.Context[errcodes.KeyLimitName] != "gpu_vram_mb" {
		t.Fatalf("a task no GPU is large enough for: %s, %+v; want error 5005 on gpu_vram_mb", huge.State, huge.Error)
	}
	for _, id := range []string{a.ID, b.ID, huge.ID} {
		if tk, _ := c.client.Get(ctx, id); tk != nil && tk.AgentID == "code-3" {
			t.Errorf("task %s went to the agent without a GPU", id)
		}
	}
}
