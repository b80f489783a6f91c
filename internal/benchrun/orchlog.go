package benchrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The orchestrator's log messages orchLog counts (orchestrator/core: registry.go's
// accept and goOffline, breaker.go's breakerChanged).
const (
	msgRegistered  = "agent registered"
	msgBreakerOpen = "circuit breaker open"
	msgOffline     = "agent offline"
)

// orchLog follows an orchestrator subprocess's JSON log: which agents registered
// since a mark, and how many breakers opened and agents went offline. A
// registration is only in the log: the orchestrator's agent list keeps a known
// agent online while the broker restarts, and keeps its first registration time.
type orchLog struct {
	mu         sync.Mutex
	since      time.Time
	registered map[string]bool // agents registered at or after since
	last       time.Time       // the latest of their registrations
	breakers   int             // breakers opened
	offline    int             // agents gone offline
	changed    chan struct{}   // a registration was counted
}

func newOrchLog() *orchLog {
	return &orchLog{registered: map[string]bool{}, changed: make(chan struct{}, 1)}
}

// line takes one line of the log.
func (l *orchLog) line(s string) {
	if !strings.Contains(s, msgRegistered) && !strings.Contains(s, msgBreakerOpen) && !strings.Contains(s, msgOffline) {
		return // most lines, such as each task's: no need to decode them
	}
	var e struct {
		Time    time.Time `json:"time"`
		Msg     string    `json:"msg"`
		AgentID string    `json:"agent_id"`
	}
	if json.Unmarshal([]byte(s), &e) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case e.Msg == msgRegistered && !e.Time.Before(l.since):
		l.registered[e.AgentID] = true
		if e.Time.After(l.last) {
			l.last = e.Time
		}
		select {
		case l.changed <- struct{}{}:
		default:
		}
	case e.Msg == msgBreakerOpen:
		l.breakers++
	case strings.HasPrefix(e.Msg, msgOffline):
		l.offline++
	}
}

// mark forgets the registrations before t, by the orchestrator's clock.
func (l *orchLog) mark(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since, l.last = t, time.Time{}
	clear(l.registered)
}

// counts are the breakers opened and agents gone offline so far.
func (l *orchLog) counts() (breakers, offline int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.breakers, l.offline
}

// waitRegistered waits until n agents have registered since the mark, or until
// timeout, errs or ctx, and returns when the last of them registered.
func (l *orchLog) waitRegistered(ctx context.Context, n int, timeout time.Duration, errs <-chan error) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		got, last := len(l.registered), l.last
		l.mu.Unlock()
		if got >= n {
			return last, nil
		}
		select {
		case <-l.changed:
		case err := <-errs:
			return time.Time{}, err
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("%d of %d agents registered again after %s", got, n, timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
