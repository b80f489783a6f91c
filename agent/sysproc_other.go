//go:build !linux

package agent

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent death signal.
func setParentDeathSignal(*syscall.SysProcAttr) {}
