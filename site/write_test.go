package site

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteRefusesBeforeMakingAnything: with a config in the way and no
// Force, Write makes no secret, not even a new agent's NKey, which the broker
// config it did not write would not list; with Force it replaces the configs
// and keeps the secrets.
func TestWriteRefusesBeforeMakingAnything(t *testing.T) {
	dir := t.TempDir()
	opts := single("127.0.0.1:8080", func(o *Options) { o.Dir = dir })
	write := func(o Options) error {
		l, err := o.Layout()
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Write()
		return err
	}
	if err := write(opts); err != nil {
		t.Fatal(err)
	}
	token, _ := os.ReadFile(filepath.Join(dir, "secrets", AgentToken("code-1")))
	opts.Agents = append(opts.Agents, Agent{"infra", "infra-1"})
	if err := write(opts); err == nil || !strings.Contains(err.Error(), "broker.conf exists; pass --force to replace it") {
		t.Fatalf("second Write: %v, want a hint at --force", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secrets", AgentNKey("infra-1"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Write made a new agent's NKey: %v", err)
	}
	opts.Force = true
	if err := write(opts); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "secrets", AgentToken("code-1"))); string(again) != string(token) || len(token) == 0 {
		t.Error("Write with Force changed an agent's token")
	}
	for _, f := range []string{"agents/infra-1.yaml", "orchestrator.yaml", "broker.conf"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
