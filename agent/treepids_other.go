//go:build !linux

package agent

// pids lists the task's processes now: here its main process only.
func (t *processTree) pids() map[int]bool { return map[int]bool{t.main: true} }
