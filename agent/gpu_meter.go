package agent

import (
	"context"
	"slices"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// gpuMeter samples the GPU memory of one task's processes while it runs and
// keeps the peaks: of each GPU, and of their total at one sample. It owns one
// goroutine, from measure until stop.
type gpuMeter struct {
	cancel context.CancelFunc
	done   chan struct{}
	gpus   []envelope.GPU // the machine's, when the task started
	// Written by the goroutine, read once done is closed.
	peakTotal int64
	peaks     map[string]int64 // by the GPU's UUID
}

// gpuSample is what a task's processes held at one sample, by GPU UUID.
type gpuSample map[string]int64

// sampleTask sums what the processes in ours hold on each GPU.
func sampleTask(apps []gpuProcess, ours map[int]bool) gpuSample {
	s := gpuSample{}
	for _, a := range apps {
		if ours[a.pid] {
			s[a.uuid] += a.usedMB
		}
	}
	return s
}

// add takes one sample into the peaks.
func (m *gpuMeter) add(s gpuSample) {
	var total int64
	for uuid, mb := range s {
		total += mb
		m.peaks[uuid] = max(m.peaks[uuid], mb)
	}
	m.peakTotal = max(m.peakTotal, total)
}

// run samples every interval until ctx ends: nvidia-smi's processes first, then
// the task's (pids), so that none counted ended before the query. seen gets
// each sample.
func (m *gpuMeter) run(ctx context.Context, smi *nvidiaSMI, every time.Duration, pids func() map[int]bool, seen func(gpuSample)) {
	defer close(m.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		apps := smi.apps(ctx)
		if ctx.Err() != nil {
			return
		}
		s := gpuSample{}
		if len(apps) > 0 {
			s = sampleTask(apps, pids())
		}
		m.add(s)
		seen(s)
	}
}

// stop ends the sampling (a query under way is killed) and returns the peak
// total and the GPUs the task's processes held memory on, with their peaks, by
// index. A nil meter measured nothing.
func (m *gpuMeter) stop() (int64, []envelope.GPUUse) {
	if m == nil {
		return 0, nil
	}
	m.cancel()
	<-m.done
	var uses []envelope.GPUUse
	for _, g := range m.gpus {
		if peak := m.peaks[g.UUID]; peak > 0 && g.UUID != "" {
			uses = append(uses, envelope.GPUUse{Index: g.Index, UUID: g.UUID, PeakMB: peak})
		}
	}
	slices.SortFunc(uses, func(a, b envelope.GPUUse) int { return a.Index - b.Index })
	return m.peakTotal, uses
}

// withAssigned is uses with the task's GPU added, with nothing measured on it,
// when not listed: a result says which GPU ran its task.
func withAssigned(uses []envelope.GPUUse, g *envelope.GPU) []envelope.GPUUse {
	if g == nil {
		return uses
	}
	for _, u := range uses {
		if u.Index == g.Index {
			return uses
		}
	}
	uses = append(slices.Clone(uses), envelope.GPUUse{Index: g.Index, UUID: g.UUID})
	slices.SortFunc(uses, func(a, b envelope.GPUUse) int { return a.Index - b.Index })
	return uses
}
