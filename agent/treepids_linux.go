package agent

import (
	"maps"
	"os"

	"golang.org/x/sys/unix"
)

// find reads the processes the task's may be among and picks out the task's
// (taskProcs), with known the task's processes at the last scan (nil: none).
// ok is false when /proc could not be read.
func (t *processTree) find(known map[int]uint64) (procs map[int]procStat, ours map[int]bool, ok bool) {
	self := os.Getpid()
	reaper.mu.Lock()
	mains := maps.Clone(reaper.mains)
	reaper.mu.Unlock()
	if reaper.childrenFiles {
		others := maps.Clone(mains)
		delete(others, t.main)
		procs = readDescendants(self, others)
	} else {
		var err error
		if procs, err = readProcs(); err != nil {
			return nil, nil, false
		}
	}
	pgid, _ := unix.Getpgid(0)
	sid, _ := unix.Getsid(0)
	ours = taskProcs(procs, self, pgid, sid, t.main, mains, known,
		func(pid int) bool { return environHas(pid, t.env...) })
	return procs, ours, true
}

// pids lists the task's processes now, as a scan finds them but for those only
// the last scan knew: it reads nothing a scan writes, so it may run beside
// watch.
func (t *processTree) pids() map[int]bool {
	_, ours, _ := t.find(nil)
	return ours
}
