//go:build chiffonfaults

package agent

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
)

// This file is compiled only with -tags chiffonfaults, for the reliability tests in
// tests/. When CHIFFON_FAULTS_STATS names a file, every SIGUSR1 writes the process's
// goroutine count there, so that a test can see an agent's goroutines come back to
// their idle number after a soak run.

func init() {
	path := os.Getenv("CHIFFON_FAULTS_STATS")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			tmp := path + ".tmp"
			if os.WriteFile(tmp, fmt.Appendf(nil, "%d\n", runtime.NumGoroutine()), 0o600) == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}()
}
