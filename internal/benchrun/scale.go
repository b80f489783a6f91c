package benchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// ScalePointFlag is the hidden flag of `chiffon bench` that runs one point of the
// scale curve (Config.ThroughputOnly) and prints its Result as JSON. RunScale
// starts the bench's own binary with it, once per GOMAXPROCS.
const ScalePointFlag = "scale-point"

// ScalePoint is one point of the scale curve: the raw and chiffon throughput
// phases in a process of their own, at one GOMAXPROCS.
type ScalePoint struct {
	// Procs is the point's GOMAXPROCS.
	Procs            int     `json:"procs"`
	ChiffonTasksPerS float64 `json:"chiffon_tasks_per_s,omitempty"`
	RawTasksPerS     float64 `json:"raw_tasks_per_s,omitempty"`
	// ThroughputRatio is chiffon / raw tasks per second.
	ThroughputRatio float64 `json:"throughput_ratio,omitempty"`
	ChiffonP50US    float64 `json:"chiffon_p50_us,omitempty"`
	ChiffonP99US    float64 `json:"chiffon_p99_us,omitempty"`
	RawP50US        float64 `json:"raw_p50_us,omitempty"`
	// ChiffonCPUUSPerTask is the point's CPU time per task (Result's).
	ChiffonCPUUSPerTask float64 `json:"chiffon_cpu_us_per_task,omitempty"`
	// Error says why the point has no figures; "" when it has them.
	Error string `json:"error,omitempty"`
}

// CoresBusy is how many cores the point's chiffon run kept busy on average: its
// tasks per second times its CPU time per task.
func (p ScalePoint) CoresBusy() float64 { return p.ChiffonTasksPerS * p.ChiffonCPUUSPerTask / 1e6 }

// ScaleResult is the scale curve: one point per GOMAXPROCS, in increasing order.
type ScaleResult struct {
	// NumCPU is the machine's processors as Go counts them.
	NumCPU   int          `json:"num_cpu"`
	Tasks    int          `json:"tasks"`
	InFlight int          `json:"inflight"`
	Size     int          `json:"size_bytes"`
	Scale    []ScalePoint `json:"scale"`
}

// ScaleProcs lists the GOMAXPROCS of the scale curve up to maxProcs: 1, 2, 4, ...
// below it, then maxProcs itself.
func ScaleProcs(maxProcs int) []int {
	var out []int
	for p := 1; p < maxProcs; p *= 2 {
		out = append(out, p)
	}
	return append(out, max(maxProcs, 1))
}

// RunScale runs the throughput phases at each GOMAXPROCS of ScaleProcs(maxProcs)
// (0 means runtime.NumCPU()), each in a fresh subprocess of cfg.Executable with
// ScalePointFlag and cfg's settings, so that every point has a scheduler, a
// heap and a broker of its own. A point that fails carries its error and the
// next ones still run; RunScale itself fails only on a bad cfg or when ctx ends.
func RunScale(ctx context.Context, cfg Config, maxProcs int) (*ScaleResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Executable == "" {
		return nil, errors.New("scale: no executable to run the points")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if maxProcs <= 0 {
		maxProcs = runtime.NumCPU()
	}
	res := &ScaleResult{NumCPU: runtime.NumCPU(), Tasks: cfg.Tasks, InFlight: cfg.InFlight, Size: cfg.Size}
	for _, procs := range ScaleProcs(maxProcs) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pt := runPoint(ctx, cfg, procs)
		if pt.Error != "" {
			fmt.Fprintf(cfg.Progress, "procs %2d: %s\n", procs, pt.Error)
		} else {
			fmt.Fprintf(cfg.Progress, "procs %2d: chiffon %8.0f task/s, raw %8.0f req/s, ratio %.2f, chiffon p50 %.1f µs, %.2f cores busy\n",
				procs, pt.ChiffonTasksPerS, pt.RawTasksPerS, pt.ThroughputRatio, pt.ChiffonP50US, pt.CoresBusy())
		}
		res.Scale = append(res.Scale, pt)
	}
	return res, nil
}

// runPoint runs one point in a subprocess with GOMAXPROCS=procs.
func runPoint(ctx context.Context, cfg Config, procs int) ScalePoint {
	pt := ScalePoint{Procs: procs}
	cmd := exec.CommandContext(ctx, cfg.Executable, cfg.pointArgs()...)
	cmd.Env = append(append(os.Environ(), cfg.ExecEnv...), "GOMAXPROCS="+strconv.Itoa(procs))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		pt.Error = fmt.Sprintf("%v: %s", err, lastLines(stderr.String(), 3))
		return pt
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		pt.Error = fmt.Sprintf("the point's output is not its figures: %v", err)
		return pt
	}
	if r.GOMAXPROCS != procs {
		pt.Error = fmt.Sprintf("the point ran with GOMAXPROCS %d, not %d", r.GOMAXPROCS, procs)
		return pt
	}
	pt.ChiffonTasksPerS, pt.RawTasksPerS, pt.ThroughputRatio = r.ChiffonTasksPerS, r.RawTasksPerS, r.ThroughputRatio
	pt.ChiffonP50US, pt.ChiffonP99US, pt.RawP50US = r.ChiffonP50US, r.ChiffonP99US, r.RawP50US
	pt.ChiffonCPUUSPerTask = r.ChiffonCPUUSPerTask
	return pt
}

// pointArgs are the arguments of `chiffon bench` that run one point with c's
// settings.
func (c Config) pointArgs() []string {
	args := []string{"bench", "--" + ScalePointFlag, "--json",
		"--tasks", strconv.Itoa(c.Tasks), "--inflight", strconv.Itoa(c.InFlight), "--size", strconv.Itoa(c.Size)}
	if c.NATSURL != "" {
		args = append(args, "--nats", c.NATSURL)
	}
	if c.Store != "" {
		args = append(args, "--store", c.Store)
	}
	if c.Replicas > 0 {
		args = append(args, "--replicas", strconv.Itoa(c.Replicas))
	}
	return args
}

// lastLines is the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' })
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
