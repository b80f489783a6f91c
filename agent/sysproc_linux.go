package agent

import "syscall"

// childSysProcAttr is how a subprocess starts: in its own process group, so that
// a kill reaches its grandchildren; as cred's user (nil: the agent's); and with
// the kernel SIGKILLing it when the agent dies (SIGKILL, OOM kill, crash), so
// that no work goes on unsupervised: the restarted agent reports the request
// interrupted, and the process is gone with it. Children that the process
// started itself (a shell's commands) are not covered by the death signal. Go
// sets the death signal after switching user, which would otherwise clear it.
func childSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
}
