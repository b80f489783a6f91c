package agent

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Ending a task's processes.
const (
	// killWait bounds how long the end of a task waits for its killed processes to
	// die (one stuck in an uninterruptible sleep); they are reaped later.
	killWait = 5 * time.Second
	// sweepEvery is how often the zombies a running task leaves to the agent are
	// reaped.
	sweepEvery = 5 * time.Second
)

// reaper is the agent process's side of its subprocesses. It is one for the
// process, not one per Agent, because children are: any Agent's reap must know
// every Agent's main processes.
var reaper = &childReaper{mains: map[int]bool{}, orphans: map[int]uint64{}}

// childReaper makes the agent a child subreaper, so that the orphans of a task are
// the agent's children rather than init's, and reaps the ones it adopts. It waits
// for a child by its pid only, and never for one os/exec waits for: wait4(-1) would
// take a task's exit status from under cmd.Wait.
type childReaper struct {
	once sync.Once // makes the agent a subreaper, and sets childrenFiles
	// childrenFiles is whether the kernel lists a process's children in /proc
	// (readDescendants), or the whole of /proc must be read (readProcs).
	childrenFiles bool
	// starting is held for reading while a main process starts and is recorded, and
	// for writing while zombies are reaped: no reap sees a main not yet recorded.
	starting sync.RWMutex
	mu       sync.Mutex
	mains    map[int]bool   // main processes os/exec waits for
	orphans  map[int]uint64 // killed children that outlived their task's end: pid, start
}

// processTree is the processes of one task: its main process and every descendant,
// found in /proc (see taskProcs).
type processTree struct {
	main    int
	env     []string       // the task's CHIFFON_TASK_ID and CHIFFON_REQUEST_ID
	seen    map[int]uint64 // the task's processes at the last scan: pid, start
	adopted map[int]uint64 // those of them that were the agent's running children
}

// startProcessTree starts cmd, req's main process, as one the agent ends with
// every descendant.
func startProcessTree(cmd *exec.Cmd, req *Request) (*processTree, error) {
	reaper.once.Do(func() {
		// Without it (Linux before 3.4), orphans go to init: the agent finds only
		// the ones still in the task's process group.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
		reaper.childrenFiles = hasChildrenFiles()
	})
	reaper.starting.RLock()
	defer reaper.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	reaper.mu.Lock()
	reaper.mains[cmd.Process.Pid] = true
	reaper.mu.Unlock()
	return &processTree{main: cmd.Process.Pid,
		env: []string{"CHIFFON_TASK_ID=" + req.TaskID, "CHIFFON_REQUEST_ID=" + req.RequestID}}, nil
}

// watch kills the tree when ctx ends before the main process has exited, and
// reaps the task's zombies meanwhile.
func (t *processTree) watch(ctx context.Context, exited <-chan struct{}) {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The main process still runs: its descendants are found by their
			// parents before they become orphans.
			t.scan(true)
			return
		case <-exited:
			return
		case <-tick.C:
			t.scan(false)
		}
	}
}

// end kills and reaps whatever is left of the task once its main process has been
// waited for: every descendant ends with its task.
func (t *processTree) end() {
	reaper.mu.Lock()
	delete(reaper.mains, t.main)
	reaper.mu.Unlock()
	deadline := time.Now().Add(killWait)
	pause := time.Millisecond
	for t.scan(true) > 0 {
		if time.Now().After(deadline) {
			reaper.mu.Lock()
			maps.Copy(reaper.orphans, t.adopted) // reaped by a later scan once dead
			reaper.mu.Unlock()
			return
		}
		time.Sleep(pause) // until the killed processes are gone: nothing to wait on
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// scan finds the task's processes, reaps those that are zombies of the agent and,
// when kill, SIGKILLs the others. It returns how many it signalled.
func (t *processTree) scan(kill bool) int {
	self := os.Getpid()
	procs, ours, ok := t.find(t.seen)
	if !ok {
		return 0
	}
	t.seen, t.adopted = map[int]uint64{}, map[int]uint64{}
	for pid := range ours {
		p := procs[pid]
		t.seen[pid] = p.start
		if p.ppid == self && !p.zombie {
			t.adopted[pid] = p.start
		}
	}
	signalled := 0
	if kill {
		_ = unix.Kill(-t.main, unix.SIGKILL) // the group, in case a member started since
		for pid := range ours {
			if !procs[pid].zombie && unix.Kill(pid, unix.SIGKILL) == nil {
				signalled++
			}
		}
	}
	reaper.reap(procs, self, ours)
	return signalled
}

// reap waits for the zombies among procs that are the agent's children and either
// in ours or orphans, except main processes.
func (r *childReaper) reap(procs map[int]procStat, self int, ours map[int]bool) {
	r.starting.Lock()
	defer r.starting.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid, p := range procs {
		start, orphan := r.orphans[pid]
		if !p.zombie || p.ppid != self || r.mains[pid] || !ours[pid] && !(orphan && start == p.start) {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid || err == unix.ECHILD {
			delete(r.orphans, pid)
		}
	}
}
