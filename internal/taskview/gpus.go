package taskview

import (
	"fmt"
	"strings"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// GPUList is an agent's GPUs, compactly, for the GPUS column of chiffon agents:
// GPUs of one model and size together, each one's free memory, then their size,
// "2× H100 79.6,12.0/80.0 GiB free; 1× L4 22.4/22.5 GiB free". chiffon agents
// --json lists each GPU whole.
func GPUList(gpus []envelope.GPU) string {
	type model struct {
		name  string
		total int64
	}
	var order []model
	free := map[model][]string{}
	for _, g := range gpus {
		m := model{gpuModel(g.Name), g.TotalMB}
		if _, ok := free[m]; !ok {
			order = append(order, m)
		}
		free[m] = append(free[m], gib(g.FreeMB))
	}
	parts := make([]string, 0, len(order))
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%d× %s %s/%s GiB free", len(free[m]), m.name, strings.Join(free[m], ","), gib(m.total)))
	}
	return strings.Join(parts, "; ")
}

// gpuModel is a GPU's model without its maker and memory size, for a column:
// "NVIDIA H100 80GB HBM3" is "H100", "NVIDIA GeForce RTX 4090" "RTX 4090".
func gpuModel(name string) string {
	words := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(name, "NVIDIA "), "GeForce "))
	if len(words) > 2 {
		words = words[:2]
	}
	if len(words) == 2 && strings.HasSuffix(words[1], "GB") {
		words = words[:1]
	}
	if len(words) == 0 {
		return "GPU"
	}
	return strings.Join(words, " ")
}

// gib is mb MiB in GiB, to a tenth.
func gib(mb int64) string { return fmt.Sprintf("%.1f", float64(mb)/1024) }

// GPUUses is what a task held of each GPU it ran on, for chiffon task:
// "#0 NVIDIA H100 80GB HBM3 peak 4.0 GiB".
func GPUUses(uses []task.GPUUse) string {
	parts := make([]string, 0, len(uses))
	for _, u := range uses {
		name := u.Name
		if name == "" {
			name = u.UUID
		}
		parts = append(parts, strings.Join(strings.Fields(fmt.Sprintf("#%d %s peak %s GiB", u.Index, name, gib(u.PeakMB))), " "))
	}
	return strings.Join(parts, ", ")
}
