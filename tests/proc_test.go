package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faultsBin is chiffon built with -tags chiffonfaults: the same program, plus the
// test-only fault hooks that CHIFFON_FAULTS and CHIFFON_FAULTS_STATS turn on.
var (
	faultsBin      string
	faultsBuild    sync.Once
	faultsBuildErr error
)

// faultsBinary builds the fault-injecting binary once per test run.
func faultsBinary(t *testing.T) string {
	t.Helper()
	faultsBuild.Do(func() {
		faultsBin = filepath.Join(filepath.Dir(chiffonBin), "chiffon-faults")
		out, err := exec.Command("go", "build", "-tags", "chiffonfaults", "-o", faultsBin, "../cmd/chiffon").CombinedOutput()
		if err != nil {
			faultsBuildErr = fmt.Errorf("build chiffon -tags chiffonfaults: %v\n%s", err, out)
		}
	})
	if faultsBuildErr != nil {
		t.Fatal(faultsBuildErr)
	}
	return faultsBin
}

// proc is one daemon process of a cluster. Its stdout and stderr go to a log file
// that every restart of the same daemon appends to.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit, failing the test after d.
func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s (pid %d) did not exit within %s", p.name, p.pid(), d)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 10*time.Second)
}

// suspend stops the process with SIGSTOP and waits until the kernel says it is
// stopped: the signal is delivered asynchronously, and a process still running
// for a moment could answer a request sent after the signal.
func (p *proc) suspend(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.pid())
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) not stopped 10s after SIGSTOP: %s", p.name, p.pid(), b)
		}
		time.Sleep(time.Millisecond)
	}
}

// stop asks the process to stop with SIGTERM and waits for it.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT) // a goroutine dump in its log
		p.wait(t, 5*time.Second)
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
	}
}
