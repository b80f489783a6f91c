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
	stop    treeStop       // set by watch when ctx ends first, and by end
}

// startProcessTree starts cmd, req's main process, as one the agent ends with
// every descendant; grace is the work type's cancel_grace.
func startProcessTree(cmd *exec.Cmd, req *Request, grace time.Duration) (*processTree, error) {
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
	return &processTree{main: cmd.Process.Pid, stop: treeStop{grace: grace},
		env: []string{"CHIFFON_TASK_ID=" + req.TaskID, "CHIFFON_REQUEST_ID=" + req.RequestID}}, nil
}

// watch stops the tree when ctx ends before the main process has exited (see
// stopTree), and reaps the task's zombies meanwhile.
func (t *processTree) watch(ctx context.Context, exited <-chan struct{}) {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			t.stopTree(exited, tick.C)
			return
		case <-exited:
			return
		case <-tick.C:
			t.scan(0)
		}
	}
}

// stopTree signals the tree of a main process that still runs, so that its
// descendants are found by their parents before they become orphans: SIGTERM,
// then SIGKILL when the main process still runs after the grace; SIGKILL at once
// when the grace is 0. It returns when the main process has exited or is killed.
func (t *processTree) stopTree(exited <-chan struct{}, sweep <-chan time.Time) {
	if t.stop.grace <= 0 {
		t.stop.killAt = time.Now()
		t.scan(unix.SIGKILL)
		return
	}
	t.stop.termAt = time.Now()
	t.scan(unix.SIGTERM)
	graceEnd := time.NewTimer(t.stop.grace)
	defer graceEnd.Stop()
	for {
		select {
		case <-exited:
			t.stop.mainAt = time.Now()
			return
		case <-graceEnd.C:
			t.stop.killAt = time.Now()
			t.scan(unix.SIGKILL)
			return
		case <-sweep:
			t.scan(0)
		}
	}
}

// end kills and reaps whatever is left of the task once its main process has been
// waited for: every descendant ends with its task. When the main process exited
// within the grace after SIGTERM, the rest of the tree has the rest of it first.
func (t *processTree) end() {
	reaper.mu.Lock()
	delete(reaper.mains, t.main)
	reaper.mu.Unlock()
	if t.stop.waiting() {
		t.awaitExit(t.stop.termAt.Add(t.stop.grace))
	}
	left := t.scan(unix.SIGKILL)
	t.stop.ended(left > 0)
	deadline := time.Now().Add(killWait)
	pause := time.Millisecond
	for ; left > 0; left = t.scan(unix.SIGKILL) {
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

// awaitExit waits until none of the task's processes runs, or until deadline.
func (t *processTree) awaitExit(deadline time.Time) {
	pause := time.Millisecond
	for t.scan(0) > 0 {
		wait := time.Until(deadline)
		if wait <= 0 {
			return
		}
		time.Sleep(min(pause, wait)) // the processes are not the agent's to wait for
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// scan finds the task's processes, reaps those that are zombies of the agent and
// sends sig to the others, and to the main process's group; sig 0 sends nothing.
// It returns how many of them run (how many it signalled).
func (t *processTree) scan(sig unix.Signal) int {
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
	if sig != 0 {
		_ = unix.Kill(-t.main, sig) // the group, in case a member started since
	}
	running := 0
	for pid := range ours {
		p := procs[pid]
		// A SIGTERM goes once to each: a second may mean "now" to a program.
		direct := sig
		if sig == unix.SIGTERM && p.pgid == t.main {
			direct = 0
		}
		if !p.zombie && unix.Kill(pid, direct) == nil {
			running++
		}
	}
	reaper.reap(procs, self, ours)
	return running
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
