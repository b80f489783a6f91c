package agent

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/chiffon-dev/chiffon/envelope"
)

// machineResources describes this machine with the given GPUs (their total
// memory; the list itself travels in x_custom_fields, envelope.PutGPUs); dir is
// where free disk is measured.
func machineResources(dir string, gpus []envelope.GPU) *envelope.Resources {
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
