//go:build !linux

package agent

// HardenProcess does nothing on this system; on Linux it keeps the agent's
// children from reading its environment and memory through /proc.
func HardenProcess() error { return nil }
