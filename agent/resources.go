package agent

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// machineResources describes this machine with the given GPUs; dir is where free disk
// is measured.
func machineResources(dir string, gpus []gpu) *envelope.Resources {
	r := &envelope.Resources{CPUCores: int64(runtime.NumCPU()), MemoryMB: meminfoMB("MemTotal")}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		r.DiskFreeMB = int64(st.Bavail) * int64(st.Bsize) >> 20
	}
	for _, g := range gpus {
		r.GPUVRAMMB += g.TotalMB
	}
	return r
}

// availableMemoryMB is MemAvailable from /proc/meminfo, or 0 when unknown.
func availableMemoryMB() int64 { return meminfoMB("MemAvailable") }

func meminfoMB(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb >> 10
	}
	return 0
}

// gpu is one GPU as nvidia-smi reports it.
type gpu struct {
	Name    string `json:"name"`
	TotalMB int64  `json:"vram_total_mb"`
	UsedMB  int64  `json:"vram_used_mb"`
}

// gpuMemory asks nvidia-smi for each GPU's memory; nil without nvidia-smi.
func gpuMemory() []gpu {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--query-gpu=name,memory.total,memory.used",
		"--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	var gpus []gpu
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 3 {
			continue
		}
		total, _ := strconv.ParseInt(strings.TrimSpace(f[1]), 10, 64)
		used, _ := strconv.ParseInt(strings.TrimSpace(f[2]), 10, 64)
		gpus = append(gpus, gpu{Name: strings.TrimSpace(f[0]), TotalMB: total, UsedMB: used})
	}
	return gpus
}
