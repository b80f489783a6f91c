package agent

import (
	"context"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// nvidiaSMITimeout bounds one nvidia-smi query: one that takes longer is
// killed and read as no answer. A hung driver makes nvidia-smi hang, and a
// heartbeat must not wait on it.
const nvidiaSMITimeout = 3 * time.Second

// nvidiaSMI asks nvidia-smi about the machine's GPUs and the processes using
// them. It never fails: no program, one that fails or is slow, and lines it
// cannot read all mean no GPUs or no usage.
type nvidiaSMI struct {
	// path is the program; "" means the machine has none.
	path string
	// timeout bounds each query; 0 means nvidiaSMITimeout.
	timeout time.Duration
	log     *slog.Logger
}

// newNvidiaSMI is the nvidia-smi at path, or the one on PATH when path is "".
func newNvidiaSMI(path string, log *slog.Logger) *nvidiaSMI {
	if path == "" {
		path, _ = exec.LookPath("nvidia-smi")
	}
	return &nvidiaSMI{path: path, log: log}
}

// gpuProcess is one process's memory on one GPU, as
// --query-compute-apps reports it.
type gpuProcess struct {
	pid    int
	uuid   string // the GPU's
	usedMB int64
}

// gpus lists the machine's GPUs with their memory free now.
func (n *nvidiaSMI) gpus(ctx context.Context) []envelope.GPU {
	return parseGPUs(n.query(ctx, "--query-gpu=index,uuid,name,memory.total,memory.free"))
}

// apps lists the GPU memory each process holds, per GPU.
func (n *nvidiaSMI) apps(ctx context.Context) []gpuProcess {
	return parseApps(n.query(ctx, "--query-compute-apps=pid,gpu_uuid,used_memory"))
}

// query runs nvidia-smi with the query argument in CSV without header or
// units; nil when it cannot.
func (n *nvidiaSMI) query(ctx context.Context, q string) []byte {
	if n == nil || n.path == "" {
		return nil
	}
	timeout := n.timeout
	if timeout == 0 {
		timeout = nvidiaSMITimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.path, q, "--format=csv,noheader,nounits")
	// A child of the program that outlives its kill must not hold the pipe.
	cmd.WaitDelay = 100 * time.Millisecond
	out, err := cmd.Output()
	if err != nil {
		if n.log != nil {
			n.log.Debug("nvidia-smi: no answer", "path", n.path, "query", q, "err", err)
		}
		return nil
	}
	return out
}

// csvFields splits one line of nvidia-smi's CSV into its trimmed fields.
func csvFields(line string) []string {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// mib reads a whole number of MiB; "[N/A]" and the like are not.
func mib(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0 && n <= 1<<40
}

// parseGPUs reads "index, uuid, name, memory.total, memory.free" lines; a line
// it cannot read is left out.
func parseGPUs(out []byte) []envelope.GPU {
	var gpus []envelope.GPU
	for _, line := range strings.Split(string(out), "\n") {
		f := csvFields(line)
		if len(f) != 5 {
			continue
		}
		index, err := strconv.Atoi(f[0])
		total, okTotal := mib(f[3])
		free, okFree := mib(f[4])
		if err != nil || index < 0 || index > 1<<16 || !okTotal || !okFree || f[2] == "" {
			continue
		}
		uuid := f[1]
		if !strings.HasPrefix(uuid, "GPU-") { // "[N/A]"
			uuid = ""
		}
		gpus = append(gpus, envelope.GPU{Index: index, UUID: uuid, Name: f[2], TotalMB: total, FreeMB: min(free, total)})
	}
	return gpus
}

// parseApps reads "pid, gpu_uuid, used_memory" lines; a line it cannot read
// ("[N/A]" memory, as some drivers say in a container) is left out.
func parseApps(out []byte) []gpuProcess {
	var procs []gpuProcess
	for _, line := range strings.Split(string(out), "\n") {
		f := csvFields(line)
		if len(f) != 3 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		used, ok := mib(f[2])
		if err != nil || pid <= 0 || !ok || f[1] == "" {
			continue
		}
		procs = append(procs, gpuProcess{pid: pid, uuid: f[1], usedMB: used})
	}
	return procs
}
