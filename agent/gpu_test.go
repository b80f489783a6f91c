package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent"
	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/nats-io/nats.go"
)

// fakeSMI is a fake nvidia-smi for gpu.nvidia_smi: a shell script that answers
// --query-gpu with the file gpus and --query-compute-apps with what apps.sh,
// sourced with $d its dir, prints. The test rewrites both as it goes.
type fakeSMI struct {
	t    *testing.T
	dir  string
	path string
}

// Two GPUs of the fake, as nvidia-smi's lines and as the agent reports them.
const (
	gpu0Line = "0, GPU-aaa, Fake H100, 81559, 80000"
	gpu1Line = "1, GPU-bbb, Fake H100, 81559, 80000"
)

var (
	gpu0 = envelope.GPU{Index: 0, UUID: "GPU-aaa", Name: "Fake H100", TotalMB: 81559, FreeMB: 80000}
	gpu1 = envelope.GPU{Index: 1, UUID: "GPU-bbb", Name: "Fake H100", TotalMB: 81559, FreeMB: 80000}
)

func newFakeSMI(t *testing.T, gpus ...string) *fakeSMI {
	t.Helper()
	f := &fakeSMI{t: t, dir: t.TempDir()}
	f.path = filepath.Join(f.dir, "nvidia-smi")
	f.write("nvidia-smi", `#!/bin/sh
d='`+f.dir+`'
case "$1" in
--query-gpu=*) exec cat "$d/gpus" ;;
--query-compute-apps=*) [ -f "$d/apps.sh" ] && . "$d/apps.sh"; exit 0 ;;
esac
exit 1
`)
	if err := os.Chmod(f.path, 0o755); err != nil {
		t.Fatal(err)
	}
	f.setGPUs(gpus...)
	return f
}

// write replaces the file name at once: the fake never reads half of it.
func (f *fakeSMI) write(name, text string) {
	f.t.Helper()
	tmp := filepath.Join(f.dir, "."+name)
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, name)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSMI) setGPUs(lines ...string) { f.write("gpus", strings.Join(lines, "\n")+"\n") }

// waitFile waits until ok holds of the file's text (it may not be there yet).
func waitFile(t *testing.T, path string, ok func(text string) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(path)
		if err == nil && ok(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q, err %v, after %s", path, b, err, wait)
		}
		time.Sleep(5 * time.Millisecond) // polling a file, within the deadline
	}
}

// withNeed gives a work_request's x_custom_fields asking for mb of GPU memory.
func withNeed(env *envelope.Envelope, mb any) *envelope.Envelope {
	env.XCustomFields = map[string]any{envelope.KeyGPUVRAMMB: mb}
	return env
}

// resultGPUs reads a result's x_custom_fields.gpus.
func resultGPUs(t *testing.T, env *envelope.Envelope) []envelope.GPUUse {
	t.Helper()
	uses, err := envelope.GPUUses(env.XCustomFields)
	if err != nil {
		t.Fatal(err)
	}
	return uses
}

// holdScript is a shell work type's script that says its CUDA_VISIBLE_DEVICES
// and runs until the file $D/release is there.
const holdScript = `echo "cvd=${CUDA_VISIBLE_DEVICES-unset}."
i=0
while [ ! -e "$D/release" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 3; sleep 0.01; done`

// gpuAgent starts an agent whose nvidia-smi is fake, with work types of holdScript
// (or the script given) that get D set to dir.
func gpuAgent(t *testing.T, fake string, dir string, mutate func(*agent.Config), types map[string]agent.WorkTypeConfig) *harness {
	t.Helper()
	for name, wt := range types {
		if wt.Shell == "" {
			wt.Shell = holdScript
		}
		if wt.SetEnv == nil {
			wt.SetEnv = map[string]string{}
		}
		wt.SetEnv["D"] = dir
		wt.Env = []string{"CUDA_VISIBLE_DEVICES"}
		types[name] = wt
	}
	h := newHarness(t, func(c *agent.Config) {
		c.GPU = agent.GPUConfig{NVIDIASMI: fake, SampleInterval: agent.Duration(agent.MinGPUSampleInterval)}
		c.WorkTypes = types
		if mutate != nil {
			mutate(c)
		}
	})
	h.start(nil)
	return h
}

// cudaDevices reads the cvd= line holdScript prints.
func cudaDevices(w *watch) string {
	w.h.t.Helper()
	w.waitOutput("cvd=")
	for !strings.Contains(string(w.out), ".\n") {
		w.next()
	}
	out := string(w.out)
	i := strings.Index(out, "cvd=")
	return out[i+4 : i+strings.Index(out[i:], ".\n")]
}

// TestGPUMemoryIsTheTasksPeak: a task's processes, the main one and a child,
// hold GPU memory that rises and falls (100, 4096, 200 MiB on GPU 0, 300 on
// GPU 1); the result reports the peak of their total and each GPU's own peak,
// not the last sample, and nothing of processes outside the task.
func TestGPUMemoryIsTheTasksPeak(t *testing.T) {
	dir := t.TempDir()
	fake := newFakeSMI(t, gpu0Line, gpu1Line)
	fake.write("seq", "100\n4096\n200\n")
	fake.write("apps.sh", `D='`+dir+`'
[ -s "$D/main" ] && [ -s "$D/child" ] || exit 0
n=$(cat "$d/n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$d/n"
mem=$(sed -n "${n}p" "$d/seq")
if [ -z "$mem" ]; then mem=$(tail -n 1 "$d/seq"); : > "$D/seen"; fi
echo "$(cat "$D/main"), GPU-aaa, $mem"
echo "$(cat "$D/child"), GPU-bbb, 300"
echo "$PPID, GPU-aaa, 9999"
echo "1, GPU-bbb, 7777"`)
	h := gpuAgent(t, fake.path, dir, nil, map[string]agent.WorkTypeConfig{"train": {Shell: `
sleep 1000 >/dev/null 2>&1 &
echo $! > "$D/child.tmp" && mv "$D/child.tmp" "$D/child"
echo $$ > "$D/main.tmp" && mv "$D/main.tmp" "$D/main"
i=0
while [ ! -e "$D/seen" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 3; sleep 0.01; done`}})
	r, env := h.send(h.request("train", nil, nil)).result()
	if r.Status != envelope.ResultSuccess {
		t.Fatalf("result %+v", r)
	}
	if got := r.ResourcesUsed.GPUVRAMMB; got != 4096+300 {
		t.Errorf("gpu_vram_mb %d, want %d: the peak of the task's total", got, 4096+300)
	}
	want := []envelope.GPUUse{{Index: 0, UUID: "GPU-aaa", PeakMB: 4096}, {Index: 1, UUID: "GPU-bbb", PeakMB: 300}}
	if got := resultGPUs(t, env); !reflect.DeepEqual(got, want) {
		t.Errorf("gpus %+v, want %+v", got, want)
	}
}

// TestGPUMemoryOfAnotherTaskIsNotCounted: two tasks run at once, each holding
// its own memory on the same GPU; each result has its own only.
func TestGPUMemoryOfAnotherTaskIsNotCounted(t *testing.T) {
	dir := t.TempDir()
	fake := newFakeSMI(t, gpu0Line)
	fake.write("apps.sh", `D='`+dir+`'
[ -s "$D/a" ] && [ -s "$D/b" ] || exit 0
echo "$(cat "$D/a"), GPU-aaa, 1000"
echo "$(cat "$D/b"), GPU-aaa, 5000"
n=$(cat "$d/n" 2>/dev/null || echo 0); echo $((n+1)) > "$d/n.tmp"; mv "$d/n.tmp" "$d/n"`)
	script := `echo $$ > "$D/$NAME.tmp" && mv "$D/$NAME.tmp" "$D/$NAME"
` + holdScript
	h := gpuAgent(t, fake.path, dir, nil, map[string]agent.WorkTypeConfig{
		"a": {Shell: script, SetEnv: map[string]string{"NAME": "a"}},
		"b": {Shell: script, SetEnv: map[string]string{"NAME": "b"}},
	})
	wa, wb := h.send(h.request("a", nil, nil)), h.send(h.request("b", nil, nil))
	// Ten samples of both tasks' processes: each task's meter took some.
	waitFile(t, filepath.Join(fake.dir, "n"), func(s string) bool { n, _ := strconv.Atoi(strings.TrimSpace(s)); return n >= 10 })
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w    *watch
		peak int64
	}{{wa, 1000}, {wb, 5000}} {
		r, env := c.w.result()
		want := []envelope.GPUUse{{Index: 0, UUID: "GPU-aaa", PeakMB: c.peak}}
		if got := resultGPUs(t, env); r.ResourcesUsed.GPUVRAMMB != c.peak || !reflect.DeepEqual(got, want) {
			t.Errorf("gpu_vram_mb %d, gpus %+v; want %d, %+v", r.ResourcesUsed.GPUVRAMMB, got, c.peak, want)
		}
	}
}

// wantGPURefusal checks a 5005 for GPU memory with its amounts, retryable.
func wantGPURefusal(t *testing.T, p *envelope.ErrorPayload, available, required int64) {
	t.Helper()
	num := func(k string) int64 {
		n, _ := p.ErrorContext[k].(json.Number).Int64()
		return n
	}
	if p.ErrorCode != int(errcodes.ResourceLimitExceeded) || !errcodes.Code(p.ErrorCode).Retryable() ||
		p.ErrorContext[errcodes.KeyLimitName] != agent.LimitGPUVRAM ||
		num(errcodes.KeyAvailable) != available || num(errcodes.KeyRequired) != required {
		t.Fatalf("want a retryable 5005 gpu_vram_mb, available %d, required %d; got %d %v",
			available, required, p.ErrorCode, p.ErrorContext)
	}
}

// TestGPUAdmission: a task that needs more GPU memory than any GPU has free is
// refused with a retryable 5005 saying how much there is, and nothing runs;
// sent again once there is enough, the same request runs (the refusal was not
// its outcome). The need is the request's, else the work type's. A malformed
// need is a 5003.
func TestGPUAdmission(t *testing.T) {
	dir := t.TempDir()
	fake := newFakeSMI(t, "0, GPU-aaa, Fake H100, 81559, 4000")
	run := `: > "$D/ran"; echo "cvd=${CUDA_VISIBLE_DEVICES-unset}."`
	h := gpuAgent(t, fake.path, dir, nil, map[string]agent.WorkTypeConfig{
		"train": {Shell: run}, "sized": {Shell: run, GPUVRAMMB: 8000}})

	req := withNeed(h.request("train", nil, nil), 8000)
	wantGPURefusal(t, h.send(req).errorReply(), 4000, 8000)
	wantGPURefusal(t, h.send(h.request("sized", nil, nil)).errorReply(), 4000, 8000)
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("a refused task ran")
	}
	p := h.send(withNeed(h.request("train", nil, nil), "lots")).errorReply()
	if p.ErrorCode != int(errcodes.InvalidMessage) || p.ErrorContext[errcodes.KeyFieldName] != "x_custom_fields.gpu_vram_mb" {
		t.Fatalf("malformed need: %d %v", p.ErrorCode, p.ErrorContext)
	}

	// The request's need takes the work type's place.
	w := h.send(withNeed(h.request("sized", nil, nil), 1000))
	if r, env := w.result(); r.Status != envelope.ResultSuccess || !strings.Contains(r.Output, "cvd=GPU-aaa.") ||
		!reflect.DeepEqual(resultGPUs(t, env), []envelope.GPUUse{{Index: 0, UUID: "GPU-aaa"}}) {
		t.Fatalf("a smaller need than the work type's: %+v, gpus %v", r, env.XCustomFields)
	}

	fake.setGPUs("0, GPU-aaa, Fake H100, 81559, 80000")
	r, env := h.send(req).result()
	if r.Status != envelope.ResultSuccess || !strings.Contains(r.Output, "cvd=GPU-aaa.") {
		t.Fatalf("sent again with room: %+v", r)
	}
	if got := resultGPUs(t, env); !reflect.DeepEqual(got, []envelope.GPUUse{{Index: 0, UUID: "GPU-aaa"}}) {
		t.Fatalf("the result does not name the task's GPU: %+v", got)
	}
}

// TestGPUNeedOnAnAgentWithoutGPUs: without nvidia-smi the agent has no GPU to
// give: 5005 with nothing available. A task without a need runs.
func TestGPUNeedOnAnAgentWithoutGPUs(t *testing.T) {
	dir := t.TempDir()
	h := gpuAgent(t, filepath.Join(dir, "no-nvidia-smi"), dir, nil, map[string]agent.WorkTypeConfig{
		"train": {Shell: `echo "cvd=${CUDA_VISIBLE_DEVICES-unset}."`}})
	wantGPURefusal(t, h.send(withNeed(h.request("train", nil, nil), 1)).errorReply(), 0, 1)
	if r, env := h.send(h.request("train", nil, nil)).result(); r.Status != envelope.ResultSuccess || env.XCustomFields[envelope.KeyGPUs] != nil {
		t.Fatalf("a task without a need: %+v %v", r, env.XCustomFields)
	}
}

// TestExclusiveGPUsGoOneToATask: two tasks with a need on two GPUs each get
// their own, named by UUID in CUDA_VISIBLE_DEVICES; a third is refused while
// they run, and runs once they have ended. A task without a need keeps the
// CUDA_VISIBLE_DEVICES its work type passes on.
func TestExclusiveGPUsGoOneToATask(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "agents-own")
	dir := t.TempDir()
	fake := newFakeSMI(t, gpu0Line, gpu1Line)
	h := gpuAgent(t, fake.path, dir, nil, map[string]agent.WorkTypeConfig{"train": {}})
	wa := h.send(withNeed(h.request("train", nil, nil), 1000))
	wb := h.send(withNeed(h.request("train", nil, nil), 1000))
	a, b := cudaDevices(wa), cudaDevices(wb)
	if a == b || !strings.HasPrefix(a, "GPU-") || !strings.HasPrefix(b, "GPU-") {
		t.Fatalf("CUDA_VISIBLE_DEVICES %q and %q: want a GPU each", a, b)
	}
	wantGPURefusal(t, h.send(withNeed(h.request("train", nil, nil), 1000)).errorReply(), 0, 1000)
	wn := h.send(h.request("train", nil, nil))
	if got := cudaDevices(wn); got != "agents-own" {
		t.Fatalf("a task without a need sees CUDA_VISIBLE_DEVICES %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for uuid, w := range map[string]*watch{a: wa, b: wb} {
		r, env := w.result()
		if got := resultGPUs(t, env); r.Status != envelope.ResultSuccess || len(got) != 1 || got[0].UUID != uuid {
			t.Errorf("task on %s: %s, gpus %+v", uuid, r.Status, got)
		}
	}
	if _, env := wn.result(); env.XCustomFields[envelope.KeyGPUs] != nil {
		t.Errorf("a task without a need names a GPU: %v", env.XCustomFields)
	}
	if r, _ := h.send(withNeed(h.request("train", nil, nil), 1000)).result(); r.Status != envelope.ResultSuccess {
		t.Fatalf("after the GPUs were given back: %+v", r)
	}
}

// TestSharedGPUsPackByMemory: in shared mode tasks go to the GPU that fits
// their need best, sharing one while its free memory, less the needs its
// tasks do not show yet, covers the next; then they are refused with the most
// any GPU can give.
func TestSharedGPUsPackByMemory(t *testing.T) {
	dir := t.TempDir()
	fake := newFakeSMI(t, "0, GPU-aaa, Fake, 81559, 10000", "1, GPU-bbb, Fake, 81559, 6000")
	h := gpuAgent(t, fake.path, dir, func(c *agent.Config) { c.GPU.Sharing = agent.GPUShared },
		map[string]agent.WorkTypeConfig{"train": {}})
	var ws []*watch
	for i, want := range []string{"GPU-bbb", "GPU-aaa", "GPU-aaa"} {
		w := h.send(withNeed(h.request("train", nil, nil), 4000))
		if got := cudaDevices(w); got != want {
			t.Fatalf("task %d of 4000 MiB on %s, want %s", i, got, want)
		}
		ws = append(ws, w)
	}
	wantGPURefusal(t, h.send(withNeed(h.request("train", nil, nil), 4000)).errorReply(), 2000, 4000)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if r, _ := w.result(); r.Status != envelope.ResultSuccess {
			t.Errorf("result %+v", r)
		}
	}
}

// TestRegistrationAndHeartbeatsCarryTheGPUs: the registration lists the
// fake's GPUs (in x_custom_fields.gpus, which the previous release's strict
// schemas let through) and their total memory; a heartbeat has the free memory
// as of when it was sent.
func TestRegistrationAndHeartbeatsCarryTheGPUs(t *testing.T) {
	fake := newFakeSMI(t, gpu0Line, gpu1Line)
	h := newHarness(t, func(c *agent.Config) {
		c.GPU.NVIDIASMI = fake.path
		c.HeartbeatInterval = agent.Duration(20 * time.Millisecond)
	})
	regs, hbs := make(chan *nats.Msg, 16), make(chan *nats.Msg, 1024)
	for subject, ch := range map[string]chan *nats.Msg{broker.Subjects{}.Registers(): regs, broker.Subjects{}.Heartbeats(): hbs} {
		sub, err := h.nc.ChanSubscribe(subject, ch)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	h.start(nil)
	var reg *envelope.Envelope
	select {
	case m := <-regs:
		var err error
		if reg, err = envelope.Decode(m.Data); err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("no registration")
	}
	gpus, gerr := envelope.MachineGPUs(reg.XCustomFields)
	if r := reg.Payload.(*envelope.Register).Resources; gerr != nil || !reflect.DeepEqual(gpus, []envelope.GPU{gpu0, gpu1}) || r.GPUVRAMMB != 2*81559 {
		t.Fatalf("registration's GPUs %+v (%v), resources %+v", gpus, gerr, r)
	}
	fake.setGPUs("0, GPU-aaa, Fake H100, 81559, 1234", gpu1Line)
	for deadline := time.After(wait); ; {
		select {
		case m := <-hbs:
			env, err := envelope.Decode(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			gpus, gerr := envelope.MachineGPUs(env.XCustomFields)
			if r := env.Payload.(*envelope.Heartbeat).Resources; gerr == nil && len(gpus) == 2 && gpus[0].FreeMB == 1234 && r.GPUVRAMMB == 2*81559 {
				return
			}
		case <-deadline:
			t.Fatal("no heartbeat with GPU 0's new free memory")
		}
	}
}

// TestSharedGPUCountsWhatASampleShowsOnce: in shared mode, once a sample shows
// a task holding the memory it needs, the GPU's free memory accounts for it and
// its need is not taken off a second time.
func TestSharedGPUCountsWhatASampleShowsOnce(t *testing.T) {
	dir := t.TempDir()
	fake := newFakeSMI(t, "0, GPU-aaa, Fake, 81559, 10000")
	fake.write("apps.sh", `D='`+dir+`'
[ -e "$d/show" ] && [ -s "$D/a" ] || exit 0
echo "$(cat "$D/a"), GPU-aaa, 6000"
n=$(cat "$d/n" 2>/dev/null || echo 0); echo $((n+1)) > "$d/n.tmp"; mv "$d/n.tmp" "$d/n"`)
	h := gpuAgent(t, fake.path, dir, func(c *agent.Config) { c.GPU.Sharing = agent.GPUShared },
		map[string]agent.WorkTypeConfig{"train": {Shell: `echo $$ > "$D/a.tmp" && mv "$D/a.tmp" "$D/a"
` + holdScript}})
	wa := h.send(withNeed(h.request("train", nil, nil), 6000))
	cudaDevices(wa)
	// Before a sample shows it, the task's need is taken off the free memory.
	wantGPURefusal(t, h.send(withNeed(h.request("train", nil, nil), 4001)).errorReply(), 4000, 4001)
	// Now it holds it.
	fake.setGPUs("0, GPU-aaa, Fake, 81559, 4000")
	fake.write("show", "")
	// The second sample starts once the first has been taken in.
	waitFile(t, filepath.Join(fake.dir, "n"), func(s string) bool { n, _ := strconv.Atoi(strings.TrimSpace(s)); return n >= 2 })
	wb := h.send(withNeed(h.request("train", nil, nil), 4000))
	if got := cudaDevices(wb); got != "GPU-aaa" {
		t.Fatalf("the second task: CUDA_VISIBLE_DEVICES %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*watch{wa, wb} {
		if r, _ := w.result(); r.Status != envelope.ResultSuccess {
			t.Errorf("result %+v", r)
		}
	}
}
