package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestBenchProfilesAreWrittenWhenStopped: the trace, the CPU and the mutex
// profile bench asks for are each written, whole, once stopped; none asked
// writes nothing.
func TestBenchProfilesAreWrittenWhenStopped(t *testing.T) {
	dir := t.TempDir()
	f := benchFlags{trace: filepath.Join(dir, "t.out"), cpuProfile: filepath.Join(dir, "c.prof"),
		mutexProfile: filepath.Join(dir, "m.prof")}
	stop, err := startProfiles(f)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.SetMutexProfileFraction(0)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	trace, err := os.ReadFile(f.trace)
	if err != nil || !bytes.HasPrefix(trace, []byte("go 1.")) {
		t.Errorf("trace: %v, starts %q", err, trace[:min(len(trace), 8)])
	}
	for _, p := range []string{f.cpuProfile, f.mutexProfile} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v, want a profile", filepath.Base(p), err)
		}
	}
	stop, err = startProfiles(benchFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("%d files, want the 3 asked for", len(entries))
	}
}
