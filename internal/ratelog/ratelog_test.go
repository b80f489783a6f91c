package ratelog_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/internal/ratelog"
)

// clock is a fake time source the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 19, 4, 21, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder is a slog.Handler that keeps each record as "LEVEL msg k=v ...".
type recorder struct {
	mu    sync.Mutex
	level slog.Level
	lines []string
	recs  []slog.Record
}

func (h *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *recorder) WithGroup(string) slog.Handler                { return h }

func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "since" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, b.String())
	h.recs = append(h.recs, r)
	return nil
}

func (h *recorder) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.lines
	h.lines = nil
	return out
}

func TestLoggerPassesOneLinePerKeyPerIntervalAndSummarizesTheRest(t *testing.T) {
	type step struct {
		after time.Duration // clock advance before the line
		key   string
		level slog.Level
		msg   string
		want  []string // lines written by this call
	}
	warn, info := slog.LevelWarn, slog.LevelInfo
	cases := []struct {
		name   string
		policy ratelog.Policy
		steps  []step
	}{
		{"the first line of a key passes, the next ones in its second are counted", ratelog.Policy{}, []step{
			{0, "nats", warn, "auth failed", []string{"WARN auth failed n=0"}},
			{100 * time.Millisecond, "nats", warn, "auth failed", nil},
			{100 * time.Millisecond, "nats", warn, "auth failed", nil},
			{800 * time.Millisecond, "nats", warn, "auth failed", []string{
				"WARN 2 similar messages suppressed key=nats suppressed=2 last_message=auth failed",
				"WARN auth failed n=3"}},
		}},
		{"keys have windows of their own", ratelog.Policy{}, []step{
			{0, "nats", warn, "auth failed", []string{"WARN auth failed n=0"}},
			{0, "http", warn, "auth failed", []string{"WARN auth failed n=1"}},
			{0, "nats", warn, "auth failed", nil},
			{0, "http", warn, "auth failed", nil},
		}},
		{"a window with nothing dropped ends without a summary", ratelog.Policy{}, []step{
			{0, "nats", warn, "a", []string{"WARN a n=0"}},
			{time.Second, "nats", warn, "b", []string{"WARN b n=1"}},
		}},
		{"burst and interval are the policy's", ratelog.Policy{Interval: time.Minute, Burst: 2}, []step{
			{0, "k", warn, "a", []string{"WARN a n=0"}},
			{time.Second, "k", warn, "b", []string{"WARN b n=1"}},
			{time.Second, "k", warn, "c", nil},
			{58 * time.Second, "k", warn, "d", []string{
				"WARN 1 similar messages suppressed key=k suppressed=1 last_message=c", "WARN d n=3"}},
		}},
		{"the summary has the highest level dropped", ratelog.Policy{}, []step{
			{0, "k", info, "a", []string{"INFO a n=0"}},
			{0, "k", warn, "b", nil},
			{0, "k", info, "c", nil},
			{time.Second, "k", info, "d", []string{
				"WARN 2 similar messages suppressed key=k suppressed=2 last_message=c", "INFO d n=3"}},
		}},
		{"a line below the logger's level is not counted", ratelog.Policy{}, []step{
			{0, "k", slog.LevelDebug, "hidden", nil},
			{0, "k", warn, "a", []string{"WARN a n=1"}},
		}},
		{"keys past MaxKeys share the overflow window", ratelog.Policy{MaxKeys: 2}, []step{
			{0, "a", warn, "x", []string{"WARN x n=0"}},
			{0, "b", warn, "x", []string{"WARN x n=1"}},
			{0, "c", warn, "x", []string{"WARN x n=2"}},
			{0, "d", warn, "x", nil},
			{time.Second, "e", warn, "x", []string{ // the ended windows are forgotten: e has room
				"WARN 1 similar messages suppressed key=* suppressed=1 last_message=x", "WARN x n=4"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			h := &recorder{level: slog.LevelInfo}
			tc.policy.Now = c.Now
			l := ratelog.New(slog.New(h), tc.policy)
			for i, s := range tc.steps {
				c.advance(s.after)
				passed := l.Log(t.Context(), s.level, s.key, s.msg, "n", i)
				got := h.take()
				if strings.Join(got, "\n") != strings.Join(s.want, "\n") {
					t.Fatalf("step %d: wrote\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
				}
				if wantPass := len(s.want) > 0; passed != wantPass {
					t.Fatalf("step %d: Log reported %v, want %v", i, passed, wantPass)
				}
			}
		})
	}
}

func TestFlushWritesTheCountOfAFloodThatStopped(t *testing.T) {
	c := newClock()
	h := &recorder{}
	l := ratelog.New(slog.New(h), ratelog.Policy{Now: c.Now})
	for range 1000 {
		l.Warn("nats", "auth failed")
	}
	c.advance(300 * time.Millisecond)
	l.Flush(t.Context())
	want := []string{"WARN auth failed", "WARN 999 similar messages suppressed key=nats suppressed=999 last_message=auth failed"}
	if got := h.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("wrote\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The count was written: it is not written again, neither by Flush nor with the
	// key's next line.
	l.Flush(t.Context())
	c.advance(time.Second)
	l.Warn("nats", "auth failed")
	if got := h.take(); len(got) != 1 || got[0] != "WARN auth failed" {
		t.Fatalf("after flush: %q", got)
	}
}

func TestLinesNameTheirCaller(t *testing.T) {
	h := &recorder{}
	l := ratelog.New(slog.New(h), ratelog.Policy{Now: newClock().Now})
	_, _, line, _ := runtime.Caller(0)
	l.Warn("k", "first")
	l.Warn("k", "dropped")
	l.Flush(t.Context())
	for _, r := range h.recs {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		if filepath.Base(f.File) != "ratelog_test.go" || f.Line < line+1 || f.Line > line+3 {
			t.Errorf("%q names %s:%d", r.Message, f.File, f.Line)
		}
	}
}

func TestConcurrentLinesAreAllPassedOrCounted(t *testing.T) {
	c := newClock()
	h := &recorder{}
	l := ratelog.New(slog.New(h), ratelog.Policy{Now: c.Now, Burst: 3})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 500 {
				l.Warn(fmt.Sprint("k", g%2), "x")
			}
		})
	}
	wg.Wait()
	l.Flush(t.Context())
	passed, suppressed := 0, 0
	for _, line := range h.take() {
		if n, ok := strings.CutPrefix(line, "WARN "); ok && strings.Contains(n, "suppressed=") {
			var k int
			fmt.Sscanf(n, "%d", &k)
			suppressed += k
		} else {
			passed++
		}
	}
	if passed != 6 || passed+suppressed != 8*500 {
		t.Fatalf("passed %d, suppressed %d, want 6 and %d", passed, suppressed, 8*500-6)
	}
}
