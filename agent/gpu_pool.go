package agent

import (
	"strconv"
	"sync"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
)

// How tasks with a GPU memory need share the GPUs (gpu.sharing).
const (
	// GPUExclusive gives a GPU to one such task at a time.
	GPUExclusive = "exclusive"
	// GPUShared gives a GPU to as many as its free memory covers.
	GPUShared = "shared"
)

// gpuHold is one task's hold on a GPU.
type gpuHold struct {
	key  string // gpuKey of the GPU
	need int64  // MiB the task was admitted for
	// shown is what the task's processes held on the GPU at the last sample,
	// which the GPU's free memory already accounts for.
	shown int64
}

// gpuKey names a GPU across queries: its UUID, else its index.
func gpuKey(g envelope.GPU) string {
	if g.UUID != "" {
		return g.UUID
	}
	return "#" + strconv.Itoa(g.Index)
}

// canGive is how much of g's memory a new task may have, given the holds on the
// machine's GPUs: nothing from a GPU held by a task when not shared; else its
// free memory less what its tasks were admitted for and the last sample does
// not yet show them holding.
func canGive(g envelope.GPU, holds []gpuHold, shared bool) int64 {
	key := gpuKey(g)
	free := g.FreeMB
	for _, h := range holds {
		if h.key != key {
			continue
		}
		if !shared {
			return 0
		}
		free -= max(0, h.need-h.shown)
	}
	return max(0, free)
}

// pickGPU chooses the GPU for a task that needs need MiB: of those that can
// give it, the one that would have least left (the best fit, which keeps the
// GPUs with most free memory for the tasks that need most), the first listed
// on a tie. It returns its position in gpus, or -1, and the most any GPU can
// give.
func pickGPU(gpus []envelope.GPU, holds []gpuHold, shared bool, need int64) (int, int64) {
	best, bestGive, most := -1, int64(0), int64(0)
	for i, g := range gpus {
		give := canGive(g, holds, shared)
		most = max(most, give)
		if give >= need && (best < 0 || give < bestGive) {
			best, bestGive = i, give
		}
	}
	return best, most
}

// gpuPool is which task holds which GPU, by request id.
type gpuPool struct {
	shared bool
	mu     sync.Mutex
	holds  map[string]gpuHold
}

func newGPUPool(sharing string) *gpuPool {
	return &gpuPool{shared: sharing == GPUShared, holds: map[string]gpuHold{}}
}

// assign gives request one of gpus, as they are now, for need MiB, or answers
// the 5005 that says how much the best GPU could give.
func (p *gpuPool) assign(request string, need int64, gpus []envelope.GPU) (*envelope.GPU, *errcodes.Error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	holds := make([]gpuHold, 0, len(p.holds))
	for _, h := range p.holds {
		holds = append(holds, h)
	}
	i, most := pickGPU(gpus, holds, p.shared, need)
	if i < 0 {
		return nil, errcodes.NewResourceLimitExceeded(envelope.LimitGPUVRAM, most, need)
	}
	g := gpus[i]
	p.holds[request] = gpuHold{key: gpuKey(g), need: need}
	return &g, nil
}

// show records what request's processes held on its GPU at the last sample.
func (p *gpuPool) show(request string, mb int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.holds[request]; ok {
		h.shown = mb
		p.holds[request] = h
	}
}

// release frees request's GPU, if it holds one.
func (p *gpuPool) release(request string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.holds, request)
}
