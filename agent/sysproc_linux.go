package agent

import "syscall"

// setParentDeathSignal makes the kernel SIGKILL a subprocess when the agent dies
// (SIGKILL, OOM kill, crash), so that no work goes on unsupervised: the restarted
// agent reports the request interrupted, and the process is gone with it. Children
// that the process started itself (a shell's commands) are not covered.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
