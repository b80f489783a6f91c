package agent

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
)

// TestParseGPUsLeavesOutWhatItCannotRead: nvidia-smi's lines become GPUs; a
// line with a field missing, a number that is not one or a bad index is left
// out, and an unknown UUID is "".
func TestParseGPUsLeavesOutWhatItCannotRead(t *testing.T) {
	out := "0, GPU-aaa, NVIDIA H100 80GB HBM3, 81559, 80000\n" +
		"1, [N/A], Tesla T4, 15360, 15000\n" +
		"2, GPU-ccc, Broken, [N/A], 100\n" +
		"x, GPU-ddd, Broken, 100, 100\n" +
		"3, GPU-eee, Short, 100\n" +
		"-1, GPU-fff, Negative, 100, 100\n" +
		"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n\n"
	want := []envelope.GPU{
		{Index: 0, UUID: "GPU-aaa", Name: "NVIDIA H100 80GB HBM3", TotalMB: 81559, FreeMB: 80000},
		{Index: 1, Name: "Tesla T4", TotalMB: 15360, FreeMB: 15000},
	}
	if got := parseGPUs([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := parseGPUs(nil); got != nil {
		t.Fatalf("no answer: %+v", got)
	}
}

// TestParseAppsLeavesOutWhatItCannotRead: each line is a pid's memory on a GPU;
// "[N/A]" memory (a container without the host's pids) and bad pids are left
// out.
func TestParseAppsLeavesOutWhatItCannotRead(t *testing.T) {
	out := "1234, GPU-aaa, 4096\n1234, GPU-bbb, 300\n77, GPU-aaa, [N/A]\n0, GPU-aaa, 5\nabc, GPU-aaa, 5\n88, , 5\nNo running processes found\n"
	want := []gpuProcess{{1234, "GPU-aaa", 4096}, {1234, "GPU-bbb", 300}}
	if got := parseApps([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// fakeProgram writes an executable shell script.
func fakeProgram(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNvidiaSMIThatCannotAnswerMeansNoGPUs: a missing program, one that fails,
// one that answers garbage and one slower than the timeout all give no GPUs
// and no usage, the slow one within its timeout.
func TestNvidiaSMIThatCannotAnswerMeansNoGPUs(t *testing.T) {
	gpuLine := "echo '0, GPU-aaa, Fake, 100, 50'"
	cases := map[string]string{
		"missing": filepath.Join(t.TempDir(), "nvidia-smi"),
		"failing": fakeProgram(t, gpuLine+"; exit 9"),
		"garbage": fakeProgram(t, "echo 'Failed to initialize NVML: Driver/library version mismatch'"),
		"slow":    fakeProgram(t, "exec sleep 30"),
	}
	for name, path := range cases {
		smi := &nvidiaSMI{path: path, timeout: 200 * time.Millisecond}
		start := time.Now()
		if g, a := smi.gpus(context.Background()), smi.apps(context.Background()); g != nil || a != nil {
			t.Errorf("%s: gpus %+v, apps %+v", name, g, a)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %s", name, d)
		}
	}
	smi := &nvidiaSMI{path: fakeProgram(t, gpuLine)}
	if g := smi.gpus(context.Background()); len(g) != 1 || g[0].UUID != "GPU-aaa" {
		t.Fatalf("a working one: %+v", g)
	}
	if got := newNvidiaSMI("", nil); got.path != "" {
		if _, err := os.Stat(got.path); err != nil {
			t.Fatalf("found %q on PATH: %v", got.path, err)
		}
	}
}

// TestPickGPU: the table of the assignment rule. Exclusive: a GPU held by a
// task gives nothing. Shared: a GPU gives its free memory less what its tasks
// need and the last sample does not show. Of the GPUs that can give the need,
// the best fit wins, the first on a tie; the most any can give is reported.
func TestPickGPU(t *testing.T) {
	gpus := []envelope.GPU{
		{Index: 0, UUID: "GPU-a", FreeMB: 10000},
		{Index: 1, UUID: "GPU-b", FreeMB: 6000},
	}
	held := func(key string, need, shown int64) gpuHold { return gpuHold{key: key, need: need, shown: shown} }
	cases := []struct {
		name     string
		gpus     []envelope.GPU
		holds    []gpuHold
		shared   bool
		need     int64
		wantGPU  int
		wantMost int64
	}{
		{"best fit", gpus, nil, false, 4000, 1, 10000},
		{"only the big one fits", gpus, nil, false, 8000, 0, 10000},
		{"none fits", gpus, nil, false, 12000, -1, 10000},
		{"no GPUs", nil, nil, false, 1, -1, 0},
		{"a tie goes to the first", []envelope.GPU{{Index: 0, UUID: "GPU-a", FreeMB: 5000}, {Index: 1, UUID: "GPU-b", FreeMB: 5000}}, nil, false, 1000, 0, 5000},
		{"exclusive: a held GPU gives nothing", gpus, []gpuHold{held("GPU-b", 1000, 0)}, false, 4000, 0, 10000},
		{"exclusive: both held", gpus, []gpuHold{held("GPU-a", 1, 1), held("GPU-b", 1, 1)}, false, 1, -1, 0},
		{"shared: packs onto the held GPU", gpus, []gpuHold{held("GPU-a", 5000, 0)}, true, 4000, 0, 6000},
		{"shared: the unshown need counts", gpus, []gpuHold{held("GPU-a", 4000, 0), held("GPU-b", 4000, 0)}, true, 4000, 0, 6000},
		{"shared: full", gpus, []gpuHold{held("GPU-a", 8000, 0), held("GPU-b", 4000, 0)}, true, 4000, -1, 2000},
		{"shared: what the sample shows is in free already", gpus, []gpuHold{held("GPU-a", 8000, 5000)}, true, 7000, 0, 7000},
		{"shared: using more than the need costs nothing more", gpus, []gpuHold{held("GPU-b", 1000, 3000)}, true, 6000, 1, 10000},
		{"a GPU without UUID by index", []envelope.GPU{{Index: 3, FreeMB: 100}}, []gpuHold{held("#3", 1, 0)}, false, 1, -1, 0},
	}
	for _, tc := range cases {
		got, most := pickGPU(tc.gpus, tc.holds, tc.shared, tc.need)
		if got != tc.wantGPU || most != tc.wantMost {
			t.Errorf("%s: GPU %d, most %d; want %d, %d", tc.name, got, most, tc.wantGPU, tc.wantMost)
		}
	}
}

// TestGPUPoolReleases: a released GPU is free again for exclusive use; the 5005
// names the limit and the amounts.
func TestGPUPoolReleases(t *testing.T) {
	p := newGPUPool("")
	gpus := []envelope.GPU{{Index: 0, UUID: "GPU-a", FreeMB: 100}}
	if g, err := p.assign("r1", 50, gpus); err != nil || g.UUID != "GPU-a" {
		t.Fatalf("first: %+v, %v", g, err)
	}
	_, err := p.assign("r2", 50, gpus)
	if err == nil || err.Context["limit_name"] != "gpu_vram_mb" || err.Context["available"] != int64(0) || err.Context["required"] != int64(50) {
		t.Fatalf("second while held: %v", err)
	}
	p.release("r1")
	if _, err := p.assign("r2", 50, gpus); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestGPUMeterKeepsPeaks: the per-GPU peaks and the peak of the total at one
// sample, counting only the task's processes.
func TestGPUMeterKeepsPeaks(t *testing.T) {
	m := &gpuMeter{peaks: map[string]int64{}}
	ours := map[int]bool{10: true, 11: true}
	for _, apps := range [][]gpuProcess{
		{{10, "GPU-a", 100}, {11, "GPU-b", 300}, {99, "GPU-a", 9999}},
		{{10, "GPU-a", 4096}, {11, "GPU-b", 300}, {99, "GPU-a", 9999}},
		{{10, "GPU-a", 200}, {11, "GPU-b", 1000}},
	} {
		m.add(sampleTask(apps, ours))
	}
	if m.peakTotal != 4396 || m.peaks["GPU-a"] != 4096 || m.peaks["GPU-b"] != 1000 || len(m.peaks) != 2 {
		t.Fatalf("peak total %d, peaks %v", m.peakTotal, m.peaks)
	}
}

// TestWithAssignedListsTheTasksGPU: the assigned GPU is in a result's gpus,
// once, in index order.
func TestWithAssignedListsTheTasksGPU(t *testing.T) {
	used := []envelope.GPUUse{{Index: 2, UUID: "GPU-c", PeakMB: 7}}
	got := withAssigned(used, &envelope.GPU{Index: 0, UUID: "GPU-a"})
	want := []envelope.GPUUse{{Index: 0, UUID: "GPU-a"}, {Index: 2, UUID: "GPU-c", PeakMB: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if got := withAssigned(used, &envelope.GPU{Index: 2, UUID: "GPU-c"}); !reflect.DeepEqual(got, used) {
		t.Fatalf("listed already: %+v", got)
	}
	if got := withAssigned(nil, nil); got != nil {
		t.Fatalf("none: %+v", got)
	}
}
