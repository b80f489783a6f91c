//go:build !linux

package agent

import "syscall"

// childSysProcAttr is how a subprocess starts: in its own process group, so that
// a kill reaches its grandchildren, and as cred's user (nil: the agent's). There
// is no parent death signal on this system.
func childSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
