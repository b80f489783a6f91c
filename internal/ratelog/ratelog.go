// Package ratelog bounds how many log lines of one kind are written: a flood of like
// events, such as a client retrying with a wrong token, costs a line per interval and
// a count of the rest, not a line each.
//
// It has no goroutine: the count of lines dropped for a key is written as a summary
// line just before that key's next line to pass, or by Flush.
package ratelog

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// Defaults of Policy.
const (
	DefaultInterval = time.Second
	DefaultBurst    = 1
	DefaultMaxKeys  = 1024
)

// OverflowKey is the key under which lines of keys past Policy.MaxKeys are counted.
const OverflowKey = "*"

// Policy says how many lines of each key pass. The zero value means one line per key
// per second.
type Policy struct {
	// Interval is the length of a key's window; 0 means 1 s. A window starts with the
	// first line of its key after the previous one ended.
	Interval time.Duration
	// Burst is how many lines of a key pass in one window; 0 means 1.
	Burst int
	// MaxKeys bounds the keys tracked at once, so that keys made from what a client
	// sends cannot grow without end; 0 means 1024. Lines of further keys share the
	// window of OverflowKey.
	MaxKeys int
	// Now returns the current time; nil means time.Now. Tests pass a fake clock.
	Now func() time.Time
}

// Logger writes through a *slog.Logger at most Policy.Burst lines of each key per
// Policy.Interval and counts the others. A key's next line to pass after some were
// dropped is preceded by the summary "N similar messages suppressed". It is safe for
// concurrent use.
type Logger struct {
	log *slog.Logger
	p   Policy

	mu        sync.Mutex
	windows   map[string]*window
	lastPrune time.Time
}

// window is one key's current window and what it dropped since its last summary.
type window struct {
	start      time.Time
	passed     int
	suppressed int
	level      slog.Level // the highest level dropped
	first      time.Time  // when the first dropped line came
	last       string     // the message of the last dropped line
}

// summary is a count of dropped lines to write.
type summary struct {
	key string
	w   window
}

// New returns a Logger writing to log with policy p.
func New(log *slog.Logger, p Policy) *Logger {
	if p.Interval <= 0 {
		p.Interval = DefaultInterval
	}
	if p.Burst <= 0 {
		p.Burst = DefaultBurst
	}
	if p.MaxKeys <= 0 {
		p.MaxKeys = DefaultMaxKeys
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	return &Logger{log: log, p: p, windows: map[string]*window{}}
}

// Log writes msg with args (as slog.Logger.Log takes them) unless key's window has
// passed its lines already, and reports whether it wrote it. A line below the
// logger's level is neither written nor counted.
func (l *Logger) Log(ctx context.Context, level slog.Level, key, msg string, args ...any) bool {
	return l.log1(ctx, level, key, msg, args, callerPC())
}

// Warn is Log at slog.LevelWarn with a background context.
func (l *Logger) Warn(key, msg string, args ...any) bool {
	return l.log1(context.Background(), slog.LevelWarn, key, msg, args, callerPC())
}

// Flush writes a summary for every key with lines dropped since its last summary, and
// forgets the keys whose window has ended. Call it from a ticker the caller already
// has, and at shutdown, so that the count of a flood that stopped is not lost.
func (l *Logger) Flush(ctx context.Context) {
	now := l.p.Now()
	pc := callerPC()
	l.mu.Lock()
	var out []summary
	for key, w := range l.windows {
		if w.suppressed > 0 {
			out = append(out, summary{key, *w})
			w.suppressed = 0
		}
		if now.Sub(w.start) >= l.p.Interval {
			delete(l.windows, key)
		}
	}
	l.lastPrune = now
	l.mu.Unlock()
	for _, s := range out {
		l.writeSummary(ctx, now, pc, s)
	}
}

func (l *Logger) log1(ctx context.Context, level slog.Level, key, msg string, args []any, pc uintptr) bool {
	if !l.log.Enabled(ctx, level) {
		return false
	}
	now := l.p.Now()
	l.mu.Lock()
	var pruned []summary
	if len(l.windows) >= l.p.MaxKeys && l.windows[key] == nil && now.Sub(l.lastPrune) >= l.p.Interval {
		// A new key finds the table full: make room, at most once an interval.
		l.lastPrune = now
		pruned = forgetEnded(l.windows, now, l.p.Interval)
	}
	w := l.windows[key]
	if w == nil {
		if len(l.windows) >= l.p.MaxKeys {
			key = OverflowKey
			w = l.windows[key]
		}
		if w == nil {
			w = &window{start: now}
			l.windows[key] = w
		}
	}
	var ended *summary
	if now.Sub(w.start) >= l.p.Interval {
		if w.suppressed > 0 {
			ended = &summary{key, *w}
		}
		*w = window{start: now}
	}
	pass := w.passed < l.p.Burst
	if pass {
		w.passed++
	} else {
		if w.suppressed == 0 || level > w.level {
			w.level = level
		}
		if w.suppressed == 0 {
			w.first = now
		}
		w.suppressed++
		w.last = msg
	}
	l.mu.Unlock()

	for _, s := range pruned {
		l.writeSummary(ctx, now, pc, s)
	}
	if ended != nil {
		l.writeSummary(ctx, now, pc, *ended)
	}
	if pass {
		r := slog.NewRecord(now, level, msg, pc)
		r.Add(args...)
		_ = l.log.Handler().Handle(ctx, r)
	}
	return pass
}

// forgetEnded deletes from windows the keys whose window of length interval has
// ended by now, and returns the summaries of those that dropped lines.
func forgetEnded(windows map[string]*window, now time.Time, interval time.Duration) []summary {
	var out []summary
	for k, w := range windows {
		if now.Sub(w.start) < interval {
			continue
		}
		if w.suppressed > 0 {
			out = append(out, summary{k, *w})
		}
		delete(windows, k)
	}
	return out
}

func (l *Logger) writeSummary(ctx context.Context, now time.Time, pc uintptr, s summary) {
	if !l.log.Enabled(ctx, s.w.level) {
		return
	}
	r := slog.NewRecord(now, s.w.level, fmt.Sprintf("%d similar messages suppressed", s.w.suppressed), pc)
	r.AddAttrs(slog.String("key", s.key), slog.Int("suppressed", s.w.suppressed),
		slog.Time("since", s.w.first), slog.String("last_message", s.w.last))
	_ = l.log.Handler().Handle(ctx, r)
}

// callerPC is the program counter of the caller of the exported method that calls it,
// so that a handler with AddSource names the line that logged, not this package.
func callerPC() uintptr {
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, callerPC, the exported method
	return pcs[0]
}
