package agent

import (
	"bytes"
	"os"
	"strconv"
)

// procStat is what /proc/<pid>/stat says of a process.
type procStat struct {
	ppid, pgid, sid int
	zombie          bool
	// start is when the process started, in clock ticks after boot: with the pid,
	// it names one process, where a pid alone may have been used again.
	start uint64
}

// readProcs reads the stat of every process; one that ends meanwhile is left out.
func readProcs() (map[int]procStat, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	procs := make(map[int]procStat, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			procs[pid] = p
		}
	}
	return procs, nil
}

// readDescendants reads the stat of pid's children, but those in skip, and of
// every descendant of theirs: the part of readProcs that taskProcs looks at, for
// pid the agent and skip the other tasks' main processes, read in the time the
// tree takes rather than the system.
func readDescendants(pid int, skip map[int]bool) map[int]procStat {
	procs := map[int]procStat{}
	var stack []int
	for _, c := range childrenOf(pid) {
		if !skip[c] {
			stack = append(stack, c)
		}
	}
	for len(stack) > 0 {
		pid, stack = stack[len(stack)-1], stack[:len(stack)-1]
		if p, ok := readStat(pid); ok {
			procs[pid] = p
			stack = append(stack, childrenOf(pid)...)
		}
	}
	return procs
}

// childrenOf lists pid's children from the children file of each of its threads,
// which the kernel has when built with CONFIG_PROC_CHILDREN (see
// hasChildrenFiles).
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	tids, _ := d.Readdirnames(-1)
	d.Close()
	var children []int
	for _, tid := range tids {
		b, _ := os.ReadFile(dir + tid + "/children")
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				children = append(children, c)
			}
		}
	}
	return children
}

// hasChildrenFiles reports whether /proc has the children files childrenOf reads.
func hasChildrenFiles() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
}

// readStat parses "pid (comm) state ppid pgrp session ... starttime ..." (proc(5));
// comm may hold spaces and parentheses, so the fields start after the last ')'.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	var p procStat
	var errs [4]error
	p.ppid, errs[0] = strconv.Atoi(string(f[1]))
	p.pgid, errs[1] = strconv.Atoi(string(f[2]))
	p.sid, errs[2] = strconv.Atoi(string(f[3]))
	p.start, errs[3] = strconv.ParseUint(string(f[19]), 10, 64)
	if errs != [4]error{} || string(f[0]) == "X" { // X: dead, about to vanish
		return procStat{}, false
	}
	p.zombie = string(f[0]) == "Z"
	return p, true
}

// environHas reports whether pid's environment holds each of vars (NAME=value).
// It reads the environment the process started with, as the kernel keeps it; a
// process the agent may not inspect (another user's, not dumpable) has none.
func environHas(pid int, vars ...string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, v := range vars {
		if !bytes.HasPrefix(b, []byte(v+"\x00")) && !bytes.Contains(b, []byte("\x00"+v+"\x00")) {
			return false
		}
	}
	return true
}

// taskProcs finds the processes of a task among procs (readProcs or
// readDescendants), for an agent whose pid, process group and session are self,
// selfPgid and selfSid. They are:
//   - the main process, while it runs, and the members of its process group;
//   - the processes that were the task's at the last scan (known: pid and start);
//   - the agent's children (orphans it adopted as a child subreaper) that are not
//     the main process of a task (mains) and whose environment names the task
//     (env), which a zombie, or a process on its way out, no longer has;
//   - the agent's children in a process group or session that one of the above
//     leads or belongs to: the parent of a daemon that left with setsid, or a
//     process that cleared its environment but not its session;
//   - and every descendant of these.
//
// The agent's own group and session do not count: other children of the agent
// (a Go handler's commands) share them.
func taskProcs(procs map[int]procStat, self, selfPgid, selfSid, main int, mains map[int]bool, known map[int]uint64, env func(pid int) bool) map[int]bool {
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	ours := map[int]bool{}
	add := func(pid int) { // with its descendants
		for stack := []int{pid}; len(stack) > 0; {
			pid, stack = stack[len(stack)-1], stack[:len(stack)-1]
			if !ours[pid] {
				ours[pid] = true
				stack = append(stack, children[pid]...)
			}
		}
	}
	if _, ok := procs[main]; ok {
		add(main)
	}
	for pid, p := range procs {
		if start, ok := known[pid]; p.pgid == main || ok && start == p.start {
			add(pid)
		}
	}
	var adopted []int
	for _, pid := range children[self] {
		if !mains[pid] {
			adopted = append(adopted, pid)
		}
	}
	for _, pid := range adopted {
		if !ours[pid] && !procs[pid].zombie && env(pid) {
			add(pid)
		}
	}
	for grown := true; grown; {
		grown = false
		ids := map[int]bool{main: true}
		for pid := range ours {
			ids[procs[pid].pgid], ids[procs[pid].sid] = true, true
		}
		delete(ids, selfPgid)
		delete(ids, selfSid)
		for _, pid := range adopted {
			if p := procs[pid]; !ours[pid] && (ids[p.pgid] || ids[p.sid]) {
				add(pid)
				grown = true
			}
		}
	}
	return ours
}
