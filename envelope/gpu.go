package envelope

import (
	"encoding/json"
	"math"

	"github.com/chiffon-dev/chiffon/errcodes"
)

// GPU work: an agent reports each GPU of its machine in its registration and
// heartbeats (Resources.GPUs); a work_request may say how much GPU memory its
// task needs (x_custom_fields.gpu_vram_mb), which the orchestrator routes by
// and the agent admits by (5005, limit_name gpu_vram_mb); a work_result says
// which GPUs the task ran on and the most memory its processes held on each
// (x_custom_fields.gpus; resources_used.gpu_vram_mb is the most they held on all
// GPUs together at one time). The fields
// ride in x_custom_fields, which every protocol v1.0 validator accepts.

// The x_custom_fields keys of GPU work.
const (
	// KeyGPUVRAMMB, on a work_request, is the GPU memory its task needs on one
	// GPU, in MiB: a positive integer.
	KeyGPUVRAMMB = "gpu_vram_mb"
	// KeyGPUs, on a work_result, lists the GPUs the task ran on (GPUUse).
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
