package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// TestSubmitSendsTheGPUHint: --hint gpu_vram_mb=N (or :=N) goes as the task's
// hints.gpu_vram_mb; a value that is no positive integer, or a hint no task
// takes, is a usage error that sends nothing.
func TestSubmitSendsTheGPUHint(t *testing.T) {
	clearClientEnv(t)
	var rec recorder
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.add(r)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/tasks" {
			http.NotFound(w, r)
			return
		}
		writeAPIJSON(w, http.StatusCreated, &task.Task{ID: "t1", State: task.StatePending})
	}))
	base := []string{"submit", "--to", "code", "--work-type", "train"}
	for _, hint := range []string{"gpu_vram_mb=4096", "gpu_vram_mb:=4096"} {
		code, out, errOut := runCLI(t, "", append(append(base, "--hint", hint, "--hint", "max_duration_seconds=60"), server...)...)
		if code != 0 || out != "t1\n" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", hint, code, out, errOut)
		}
		reqs := rec.all()
		jsonEqual(t, strings.TrimPrefix(reqs[len(reqs)-1], "POST /api/v1/tasks "), map[string]any{"to_agent": "code", "work_type": "train",
			"hints": map[string]any{"gpu_vram_mb": 4096, "max_duration_seconds": 60}})
	}
	sent := len(rec.all())
	for _, tc := range []struct{ hint, want string }{
		{"gpu_vram_mb=0", `gpu_vram_mb must be a positive integer, got "0"`},
		{"gpu_vram_mb=-1", "gpu_vram_mb must be a positive integer"},
		{"gpu_vram_mb=4GiB", "gpu_vram_mb must be a positive integer"},
		{"gpu_vram_mb=1.5", "gpu_vram_mb must be a positive integer"},
		{"gpu_memory=4096", `unknown hint "gpu_memory"`},
	} {
		code, _, errOut := runCLI(t, "", append(append(base, "--hint", tc.hint), server...)...)
		if code != 2 || !strings.Contains(errOut, "--hint: "+tc.want) {
			t.Errorf("--hint %s: exit %d, stderr %q; want 2 saying %q", tc.hint, code, errOut, tc.want)
		}
	}
	if n := len(rec.all()); n != sent {
		t.Errorf("usage errors sent %d requests", n-sent)
	}
}

func TestAgentsShowsAGPUsColumn(t *testing.T) {
	clearClientEnv(t)
	h100 := func(i int, free int64) envelope.GPU {
		return envelope.GPU{Index: i, Name: "NVIDIA H100 80GB HBM3", TotalMB: 81920, FreeMB: free}
	}
	agents := []api.AgentInfo{
		{ID: "gpu-1", Type: envelope.Code, State: "online", Breaker: "closed", Capacity: 2, GPUs: []envelope.GPU{h100(0, 81510)}},
		{ID: "gpu-2", Type: envelope.Code, State: "online", Breaker: "closed", Capacity: 2, GPUs: []envelope.GPU{h100(0, 81510), h100(1, 12288),
			{Index: 2, Name: "NVIDIA L4", TotalMB: 23034, FreeMB: 22938}}},
		{ID: "cpu-1", Type: envelope.Code, State: "online", Breaker: "closed", Capacity: 2},
	}
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agents":
			writeAPIJSON(w, http.StatusOK, agents)
		case "/readyz":
			writeAPIJSON(w, http.StatusOK, api.Readiness{Status: "ready"})
		default:
			http.NotFound(w, r)
		}
	}))
	code, out, errOut := runCLI(t, "", append([]string{"agents"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"GPUS", "1× H100 79.6/80.0 GiB free", "2× H100 79.6,12.0/80.0 GiB free; 1× L4 22.4/22.5 GiB free"}
	if len(lines) != 4 {
		t.Fatalf("agent table %q", out)
	}
	if col := strings.Index(lines[0], "GPUS"); col < 0 || !strings.HasPrefix(lines[3][col:], "- ") {
		t.Errorf("cpu-1 without GPUs: %q, want - under GPUS", lines[3])
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q lacks %q", i, lines[i], w)
		}
	}
	code, out, errOut = runCLI(t, "", append([]string{"agents", "--json"}, server...)...)
	var got []api.AgentInfo
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 3 || len(got[1].GPUs) != 3 || got[1].GPUs[2] != agents[1].GPUs[2] {
		t.Fatalf("--json: exit %d, %s %s", code, out, errOut)
	}
}

func TestTaskShowsTheGPUsItRanOn(t *testing.T) {
	clearClientEnv(t)
	at := time.Date(2026, 1, 19, 4, 21, 4, 0, time.UTC)
	need := int64(4096)
	tsk := &task.Task{ID: "t1", State: task.StateSucceeded, ToAgent: envelope.Code, WorkType: "train", Hints: &task.Hints{GPUVRAMMB: &need},
		CreatedAt: at, UpdatedAt: at, FinishedAt: &at, Steps: []task.StepInfo{},
		Result: &task.Result{Status: envelope.ResultSuccess, At: at, ResourcesUsed: &envelope.ResourcesUsed{GPUVRAMMB: 4096 + 512},
			GPUs: []task.GPUUse{{Index: 0, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", PeakMB: 4096}, {Index: 3, UUID: "GPU-4", PeakMB: 512}}}}
	server := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tasks/t1":
			writeAPIJSON(w, http.StatusOK, tsk)
		case "/api/v1/tasks/t1/history":
			writeAPIJSON(w, http.StatusOK, []task.Event{})
		default:
			http.NotFound(w, r)
		}
	}))
	code, out, errOut := runCLI(t, "", append([]string{"task", "t1"}, server...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"GPU memory:", "4096 MiB needed on one GPU", "GPU:", "#0 NVIDIA H100 80GB HBM3 peak 4.0 GiB, #3 GPU-4 peak 0.5 GiB"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}
