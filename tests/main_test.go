// Package tests runs the built chiffon binary across real processes.
package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chiffonBin is the binary built once for every test in this package.
var chiffonBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chiffon-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	chiffonBin = filepath.Join(dir, "chiffon")
	build := exec.Command("go", "build", "-o", chiffonBin, "../cmd/chiffon")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build chiffon:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one finished chiffon command printed and how it exited.
type result struct {
	code           int
	stdout, stderr string
}

// chiffon runs the binary to completion with a deadline and returns its result.
func chiffon(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	return chiffonIn(t, "", env, stdin, args...)
}

// chiffonIn runs the binary in dir, to completion with a deadline.
func chiffonIn(t *testing.T, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	return runBin(t, chiffonBin, dir, env, stdin, args...)
}

// chiffonBinary runs bin, a build of chiffon, to completion with a deadline.
func chiffonBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return runBin(t, bin, "", nil, "", args...)
}

// runBin runs bin in dir, to completion with a deadline.
func runBin(t *testing.T, bin, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("chiffon %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}
