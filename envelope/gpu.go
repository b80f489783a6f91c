package envelope

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// GPU work: an agent reports each GPU of its machine in its registration and
// heartbeats (x_custom_fields.gpus); a work_request may say how much GPU memory
// its task needs (x_custom_fields.gpu_vram_mb), which the orchestrator routes
// by and the agent admits by (5005, limit_name gpu_vram_mb); a work_result says
// which GPUs the task ran on and the most memory its processes held on each
// (x_custom_fields.gpus; resources_used.gpu_vram_mb is the most they held on all
// GPUs together at one time). The fields ride in x_custom_fields, which every
// protocol v1.0 validator accepts, and so does the previous release, whose
// strict schemas of registration and heartbeat know no GPU list.

// The x_custom_fields keys of GPU work.
const (
	// KeyGPUVRAMMB, on a work_request, is the GPU memory its task needs on one
	// GPU, in MiB: a positive integer.
	KeyGPUVRAMMB = "gpu_vram_mb"
	// KeyGPUs, on a registration or a heartbeat, lists the machine's GPUs
	// (GPU, MachineGPUs); on a work_result, the GPUs the task ran on (GPUUse,
	// GPUUses).
	KeyGPUs = "gpus"
)

// LimitGPUVRAM is the limit_name of a 5005 for GPU memory.
const LimitGPUVRAM = "gpu_vram_mb"

// GPU is one GPU of an agent's machine, as its registration and heartbeats
// report it.
type GPU struct {
	// Index is the GPU's index as the driver numbers it, which
	// CUDA_VISIBLE_DEVICES takes.
	Index int `json:"index"`
	// UUID is the driver's stable id of the GPU; "" when unknown.
	UUID string `json:"uuid,omitempty"`
	// Name is the GPU's model, such as "NVIDIA H100 80GB HBM3".
	Name string `json:"name"`
	// TotalMB is its memory, in MiB.
	TotalMB int64 `json:"total_mb"`
	// FreeMB is its memory free when the message was made, in MiB.
	FreeMB int64 `json:"free_mb"`
}

// GPUUse is what a task held of one GPU: the most memory its processes held
// on it at once, in MiB, as sampled while it ran.
type GPUUse struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid,omitempty"`
	PeakMB int64  `json:"peak_vram_mb"`
}

// maxGPUMB bounds a GPU memory figure: 2^40 MiB is a yottabyte's worth of
// headroom and keeps sums far from overflow.
const maxGPUMB = 1 << 40

// GPUNeed reads the GPU memory a work_request's task needs from its
// x_custom_fields: 0 when it names none, a 5003 on
// x_custom_fields.gpu_vram_mb when the value is not a positive integer.
func GPUNeed(x map[string]any) (int64, *errcodes.Error) {
	v, ok := x[KeyGPUVRAMMB]
	if !ok {
		return 0, nil
	}
	n, ok := wholeNumber(v)
	if !ok || n < 1 || n > maxGPUMB {
		return 0, errcodes.NewInvalidMessage("x_custom_fields."+KeyGPUVRAMMB, "must be an integer from 1 to %d (MiB), got %v", int64(maxGPUMB), v)
	}
	return n, nil
}

// wholeNumber reads v, a number as decoded (json.Number) or set in memory, as
// an integer.
func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > maxGPUMB {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// GPUUses reads a work_result's x_custom_fields.gpus; nil without it, a 5003
// for a value that is not a list of GPUUse with non-negative figures.
func GPUUses(x map[string]any) ([]GPUUse, *errcodes.Error) {
	v, ok := x[KeyGPUs]
	if !ok || v == nil {
		return nil, nil
	}
	bad := func() ([]GPUUse, *errcodes.Error) {
		return nil, errcodes.NewInvalidMessage("x_custom_fields."+KeyGPUs,
			"must be a list of {index, uuid, peak_vram_mb} with non-negative integers")
	}
	list, ok := v.([]any)
	if !ok {
		if uses, ok := v.([]GPUUse); ok { // set in memory
			return uses, nil
		}
		return bad()
	}
	out := make([]GPUUse, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return bad()
		}
		idx, ok1 := wholeNumber(m["index"])
		peak, ok2 := wholeNumber(m["peak_vram_mb"])
		uuid, ok3 := m["uuid"].(string)
		if _, has := m["uuid"]; !has {
			ok3 = true
		}
		if !ok1 || !ok2 || !ok3 || idx < 0 || idx > 1<<16 || peak < 0 || peak > maxGPUMB {
			return bad()
		}
		for k := range m {
			if k != "index" && k != "uuid" && k != "peak_vram_mb" {
				return bad()
			}
		}
		out = append(out, GPUUse{Index: int(idx), UUID: uuid, PeakMB: peak})
	}
	return out, nil
}

// maxGPUs bounds the GPUs of one machine a message may list.
const maxGPUs = 64

// PutGPUs lists gpus, the machine's, in x, the x_custom_fields of a
// registration or heartbeat, and returns x (made when nil); no GPU leaves x as
// it is.
func PutGPUs(x map[string]any, gpus []GPU) map[string]any {
	if len(gpus) == 0 {
		return x
	}
	if x == nil {
		x = map[string]any{}
	}
	x[KeyGPUs] = gpus
	return x
}

// MachineGPUs reads the machine's GPUs from a registration's or heartbeat's
// x_custom_fields: nil without them, a 5003 on x_custom_fields.gpus for a value
// that is not a list of at most 64 GPU objects with their required fields in
// range and no other.
func MachineGPUs(x map[string]any) ([]GPU, *errcodes.Error) {
	v, ok := x[KeyGPUs]
	if !ok || v == nil {
		return nil, nil
	}
	if gpus, ok := v.([]GPU); ok { // set in memory
		return gpus, nil
	}
	bad := func(why string) ([]GPU, *errcodes.Error) {
		return nil, errcodes.NewInvalidMessage("x_custom_fields."+KeyGPUs, "%s", why)
	}
	list, ok := v.([]any)
	if !ok || len(list) > maxGPUs {
		return bad(fmt.Sprintf("must be a list of at most %d GPUs", maxGPUs))
	}
	out := make([]GPU, 0, len(list))
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return bad(fmt.Sprintf("GPU %d is not an object", i))
		}
		g, why := readGPU(m)
		if why != "" {
			return bad(fmt.Sprintf("GPU %d: %s", i, why))
		}
		out = append(out, g)
	}
	return out, nil
}

// readGPU reads one GPU object, or says what is wrong with it.
func readGPU(m map[string]any) (GPU, string) {
	for k := range m {
		switch k {
		case "index", "uuid", "name", "total_mb", "free_mb":
		default:
			return GPU{}, fmt.Sprintf("unknown field %q", k)
		}
	}
	idx, ok1 := wholeNumber(m["index"])
	total, ok2 := wholeNumber(m["total_mb"])
	free, ok3 := wholeNumber(m["free_mb"])
	name, ok4 := m["name"].(string)
	uuid, ok5 := m["uuid"].(string)
	if _, has := m["uuid"]; !has {
		ok5 = true
	}
	switch {
	case !ok1 || idx < 0 || idx >= 1<<16:
		return GPU{}, "index must be an integer from 0 to 65535"
	case !ok4 || name == "" || len(name) > 256:
		return GPU{}, "name must be a string of 1 to 256 bytes"
	case !ok5 || len(uuid) > 128:
		return GPU{}, "uuid must be a string of at most 128 bytes"
	case !ok2 || !ok3 || total < 0 || free < 0 || total > maxGPUMB || free > maxGPUMB:
		return GPU{}, "total_mb and free_mb must be integers from 0"
	}
	return GPU{Index: int(idx), UUID: uuid, Name: name, TotalMB: total, FreeMB: free}, ""
}
