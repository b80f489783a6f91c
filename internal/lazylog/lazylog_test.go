package lazylog_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/internal/lazylog"
)

// noTime drops the time so that two handlers' lines compare equal.
func noTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func pair(level slog.Level) (eager, lazy *slog.Logger, eagerOut, lazyOut *bytes.Buffer) {
	eagerOut, lazyOut = new(bytes.Buffer), new(bytes.Buffer)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: noTime}
	base := func(w *bytes.Buffer) *slog.Logger {
		return slog.New(slog.NewTextHandler(w, opts)).With("daemon", "agent")
	}
	attrs := []slog.Attr{slog.String("task_id", "t-1"), slog.Int("attempt", 2)}
	eager = base(eagerOut).With("task_id", "t-1", "attempt", 2)
	lazy = lazylog.With(base(lazyOut), attrs...)
	return eager, lazy, eagerOut, lazyOut
}

func TestWritesWhatWithWrites(t *testing.T) {
	eager, lazy, eagerOut, lazyOut := pair(slog.LevelInfo)
	for _, l := range []*slog.Logger{eager, lazy} {
		l.Info("task finished", "state", "succeeded", slog.Group("g", "k", "v"))
		l.Debug("dropped")
		l.Warn("retry", "wait", "1s", "a1", 1, "a2", 2, "a3", 3, "a4", 4, "a5", 5) // past Record's inline attrs
		l.With("agent_id", "a-1").Info("with")
		l.WithGroup("grp").Info("grouped", "x", 1)
	}
	if eagerOut.String() != lazyOut.String() {
		t.Fatalf("lazy logger wrote\n%s\nWith wrote\n%s", lazyOut, eagerOut)
	}
	if strings.Contains(lazyOut.String(), "dropped") || !strings.Contains(lazyOut.String(), "daemon=agent task_id=t-1 attempt=2 state=succeeded") {
		t.Fatalf("unexpected output:\n%s", lazyOut)
	}
}

func TestEnabledFollowsTheParent(t *testing.T) {
	_, lazy, _, _ := pair(slog.LevelWarn)
	if lazy.Enabled(context.Background(), slog.LevelInfo) || !lazy.Enabled(context.Background(), slog.LevelWarn) {
		t.Fatal("Enabled does not follow the parent handler's level")
	}
}

func BenchmarkWith(b *testing.B) {
	base := slog.New(slog.NewTextHandler(new(bytes.Buffer), nil))
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			base.With("task_id", "t-1", "request_id", "r-1").Debug("dropped")
		}
	})
	b.Run("lazylog", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lazylog.With(base, slog.String("task_id", "t-1"), slog.String("request_id", "r-1")).Debug("dropped")
		}
	})
}
