package agent_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/chiffon-dev/chiffon/agent"
)

// hardenRoleEnv makes the test binary a process of
// TestHardenProcessHidesProcFromChildren: "parent" or "parent-hardened" (which
// calls agent.HardenProcess) starts a "child" that reports what it can open of
// its parent's /proc entry.
const hardenRoleEnv = "CHIFFON_TEST_HARDEN_ROLE"

func TestHardenProcessHidesProcFromChildren(t *testing.T) {
	bin, cred := os.Args[0], (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		// Root (CAP_SYS_PTRACE) opens any /proc/<pid>/: run parent and child as a
		// user without capabilities, from a copy of the binary that user may run.
		u := otherUser(t)
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		bin = copyExecutable(t, os.Args[0], sharedTempDir(t))
	}
	for _, tc := range []struct{ role, want string }{
		{"parent", "environ: read\nmem: opened\n"},
		{"parent-hardened", "environ: denied\nmem: denied\n"},
	} {
		cmd := exec.Command(bin, "-test.run=^TestHardenProcessHelper$")
		cmd.Env = append(os.Environ(), hardenRoleEnv+"="+tc.role)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != tc.want {
			t.Errorf("%s: child reported %q (%v), want %q", tc.role, out, err, tc.want)
		}
	}
}

// TestHardenProcessHelper is not a test: it is the parent or the child process
// of TestHardenProcessHidesProcFromChildren, and does nothing otherwise.
func TestHardenProcessHelper(t *testing.T) {
	switch role := os.Getenv(hardenRoleEnv); role {
	case "parent", "parent-hardened":
		if role == "parent-hardened" {
			if err := agent.HardenProcess(); err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHardenProcessHelper$")
		cmd.Env = append(os.Environ(), hardenRoleEnv+"=child")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	case "child":
		proc := "/proc/" + strconv.Itoa(os.Getppid())
		b, err := os.ReadFile(proc + "/environ")
		if err == nil && !strings.Contains(string(b), hardenRoleEnv+"=parent") {
			err = fmt.Errorf("not the parent's environment: %q", b)
		}
		fmt.Println("environ:", openResult(err, "read"))
		f, err := os.Open(proc + "/mem")
		if err == nil {
			f.Close()
		}
		fmt.Println("mem:", openResult(err, "opened"))
		os.Exit(0)
	}
}

// openResult is ok, "denied" for EACCES or EPERM, or the error.
func openResult(err error, ok string) string {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "denied"
	}
	return err.Error()
}

// copyExecutable copies the file src into dir as an executable every user may run.
func copyExecutable(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}
