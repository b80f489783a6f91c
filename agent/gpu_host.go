package agent

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// gpuHost is the machine's GPUs as the agent knows them: how it asks
// nvidia-smi, its last answer, and which task holds which GPU.
type gpuHost struct {
	smi   *nvidiaSMI
	every time.Duration // gpu.sample_interval
	pool  *gpuPool

	mu sync.Mutex
	// last is the last answer of refresh that listed GPUs: a query that fails
	// once does not stop a task's measurement.
	last []envelope.GPU
}

// newGPUHost is the GPUs as cfg, with its defaults, says to find and share them.
func newGPUHost(cfg GPUConfig, log *slog.Logger) *gpuHost {
	return &gpuHost{smi: newNvidiaSMI(cfg.NVIDIASMI, log), every: time.Duration(cfg.SampleInterval),
		pool: newGPUPool(cfg.Sharing)}
}

// refresh asks nvidia-smi for the GPUs and their free memory now.
func (h *gpuHost) refresh() []envelope.GPU {
	gpus := h.smi.gpus(context.Background())
	if len(gpus) > 0 {
		h.mu.Lock()
		h.last = gpus
		h.mu.Unlock()
	}
	return gpus
}

// known is the GPUs as the last refresh that found any found them.
func (h *gpuHost) known() []envelope.GPU {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// measure starts sampling the GPU memory of the processes pids lists, the
// task req's, when the machine has GPUs; nil when it has none.
func (h *gpuHost) measure(req *Request, pids func() map[int]bool) *gpuMeter {
	if h == nil {
		return nil // a work type's config being checked
	}
	gpus := h.known()
	if len(gpus) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &gpuMeter{cancel: cancel, done: make(chan struct{}), gpus: gpus, peaks: map[string]int64{}}
	var key string
	if req.GPU != nil {
		key = gpuKey(*req.GPU)
	}
	go m.run(ctx, h.smi, h.every, pids, func(s gpuSample) {
		if key != "" {
			h.pool.show(req.RequestID, s[key])
		}
	})
	return m
}

// logGPUs finds the GPUs at start and says what it found.
func (a *Agent) logGPUs() {
	gpus := a.gpu.refresh()
	switch {
	case len(gpus) > 0:
		a.log.Info("GPUs found", "count", len(gpus), "nvidia_smi", a.gpu.smi.path, "sharing", a.cfg.GPU.Sharing)
	case a.cfg.GPU.NVIDIASMI != "":
		a.log.Warn("gpu.nvidia_smi finds no GPU: the agent has none until it does", "nvidia_smi", a.cfg.GPU.NVIDIASMI)
	}
}

// gpuNeed is the GPU memory a request's task needs, in MiB: its
// x_custom_fields.gpu_vram_mb, else its work type's gpu_vram_mb; 0 for none.
// A malformed hint is a 5003.
func (a *Agent) gpuNeed(env *envelope.Envelope) (int64, *errcodes.Error) {
	need, perr := envelope.GPUNeed(env.XCustomFields)
	if perr != nil || need > 0 {
		return need, perr
	}
	if wr, ok := env.Payload.(*envelope.WorkRequest); ok {
		return a.handlers[wr.WorkType].gpuNeed, nil
	}
	return 0, nil
}

// gpuEnv is the environment that gives a task its GPU: CUDA_VISIBLE_DEVICES
// names it by UUID, which means one GPU whatever order CUDA counts them in
// (an index counts in CUDA's order, fastest first unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID, where nvidia-smi's index counts in PCI order),
// else by index. None for a task without a GPU.
func gpuEnv(g *envelope.GPU) []string {
	switch {
	case g == nil:
		return nil
	case g.UUID != "":
		return []string{"CUDA_VISIBLE_DEVICES=" + g.UUID}
	}
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strconv.Itoa(g.Index)}
}
