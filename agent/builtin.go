package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/worktype"
)

// Built-in work types, offered by every agent.
const (
	WorkEcho       = "echo"
	WorkSleep      = "sleep"
	WorkSystemInfo = "system_info"
)

var builtinNames = map[string]bool{WorkEcho: true, WorkSleep: true, WorkSystemInfo: true}

// The built-in work types' specs, as the registration's catalogue says them.
var (
	echoSpec = worktype.Spec{
		Description: "Returns the message as the task's output, repeated repeat times.",
		Parameters: map[string]any{"type": "object", "required": []any{"message"},
			"properties": map[string]any{
				"message": map[string]any{"type": "string", "description": "The text to return."},
				"repeat": map[string]any{"type": "integer", "minimum": 1, "default": 1,
					"description": "How many times to return it."},
			}},
	}
	sleepSpec = worktype.Spec{
		Description: "Waits the given seconds, writing a line and its progress each second.",
		Parameters: map[string]any{"type": "object", "required": []any{"seconds"},
			"properties": map[string]any{
				"seconds": map[string]any{"type": "number", "minimum": 0, "description": "How long to wait."},
			}},
	}
	systemInfoSpec = worktype.Spec{
		Description: "Reports the machine's OS, CPU cores, memory, free disk and GPU memory, as text and structured output.",
		Parameters:  map[string]any{"type": "object", "properties": map[string]any{}},
	}
)

func (a *Agent) addBuiltins() {
	for name, b := range map[string]struct {
		spec worktype.Spec
		h    Handler
	}{
		WorkEcho:  {echoSpec, echoHandler},
		WorkSleep: {sleepSpec, sleepHandler},
		WorkSystemInfo: {systemInfoSpec, func(ctx context.Context, _ *Request, _ Progress) (Result, error) {
			return systemInfo(a.cfg.DataDir, a.gpu.refresh())
		}},
	} {
		if err := a.HandleSpec(name, b.spec, b.h); err != nil {
			panic(err) // the built-in specs compile: a test proves it
		}
	}
}

// maxEchoOutput bounds echo's output: repeat makes large outputs for trying out
// chunking and the dashboard's tail, not unbounded ones.
const maxEchoOutput = 64 << 20

// echoHandler returns the message parameter as the output, repeat times (1 when
// not given).
func echoHandler(_ context.Context, req *Request, _ Progress) (Result, error) {
	msg, ok := req.Parameters["message"].(string)
	if !ok {
		return Result{ExitCode: 2}, fmt.Errorf("parameter message must be a string")
	}
	repeat := 1.0
	if v, given := req.Parameters["repeat"]; given {
		n, err := number(v)
		if err != nil || n < 1 || n != float64(int(n)) {
			return Result{ExitCode: 2}, fmt.Errorf("parameter repeat must be a whole number from 1")
		}
		repeat = n
	}
	if repeat*float64(len(msg)) > maxEchoOutput {
		return Result{ExitCode: 2}, fmt.Errorf("message times repeat is over %d MiB", maxEchoOutput>>20)
	}
	return Result{Output: strings.Repeat(msg, int(repeat))}, nil
}

// sleepHandler waits for the seconds parameter, reporting progress and writing a
// line of output each second, and stops early when its context ends.
func sleepHandler(ctx context.Context, req *Request, p Progress) (Result, error) {
	secs, err := number(req.Parameters["seconds"])
	if err != nil || secs < 0 {
		return Result{ExitCode: 2}, fmt.Errorf("parameter seconds must be a non-negative number")
	}
	total := time.Duration(secs * float64(time.Second))
	p.Step("sleeping")
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	done := time.NewTimer(total)
	defer done.Stop()
	for {
		select {
		case <-ctx.Done():
			return Result{}, context.Cause(ctx)
		case <-tick.C:
			fmt.Fprintf(p, "%s of %s\n", time.Since(start).Round(time.Second), total)
			p.SetPercent(int(100 * time.Since(start) / max(total, 1)))
		case <-done.C:
			p.SetPercent(100)
			return Result{Output: fmt.Sprintf("slept %s\n", total)}, nil
		}
	}
}

// number reads a JSON number parameter.
func number(v any) (float64, error) {
	switch n := v.(type) {
	case json.Number:
		return n.Float64()
	case float64:
		return n, nil
	case int:
		return float64(n), nil
	case string:
		return strconv.ParseFloat(n, 64)
	}
	return 0, fmt.Errorf("not a number")
}

// systemInfo reports CPU, memory, disk and the GPUs, as text and structured
// output. gpus is listed as a registration lists them.
func systemInfo(dataDir string, gpus []envelope.GPU) (Result, error) {
	r := machineResources(dataDir, gpus)
	if gpus == nil {
		gpus = []envelope.GPU{} // [], not null
	}
	info := map[string]any{
		"os": runtime.GOOS, "arch": runtime.GOARCH,
		"cpu_cores": r.CPUCores, "memory_total_mb": r.MemoryMB, "memory_available_mb": availableMemoryMB(),
		"disk_free_mb": r.DiskFreeMB, "gpu_vram_mb": r.GPUVRAMMB, "gpus": gpus,
	}
	b, err := json.Marshal(info)
	if err != nil {
		return Result{}, err
	}
	return Result{Output: string(b) + "\n", Structured: info}, nil
}
