package core

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Link follows the orchestrator's own connection to the broker. While it is
// down, or after it came back, what the orchestrator missed (an agent's
// heartbeats, acknowledgements, results) says nothing of the agents: an attempt
// that failed across such a blip does not count against its agent's breaker.
type Link struct {
	downAt atomic.Int64 // unix nanoseconds of the last disconnect; 0: never
	upAt   atomic.Int64 // unix nanoseconds of the last reconnect
}

// Down records that the connection dropped.
func (l *Link) Down() { l.downAt.Store(time.Now().UnixNano()) }

// Up records that the connection came back.
func (l *Link) Up() { l.upAt.Store(time.Now().UnixNano()) }

// droppedSince reports whether the connection was down at any time from t on:
// it dropped or came back since, or it is down.
func (l *Link) droppedSince(t time.Time) bool {
	down, up, at := l.downAt.Load(), l.upAt.Load(), t.UnixNano()
	return down != 0 && (down >= at || up >= at || up < down)
}

// errLinkBlip is the outcome of an attempt that failed while the orchestrator's
// own connection to the broker dropped: its breaker counts it neither as a
// failure nor as a success.
type errLinkBlip struct{ err error }

func (e *errLinkBlip) Error() string {
	return fmt.Sprintf("%v (while the orchestrator's connection to the broker dropped)", e.err)
}
func (e *errLinkBlip) Unwrap() error { return e.err }

// blame is the outcome r's attempt reports to its agent's breaker: outcome,
// unless it would count against the agent and the orchestrator's connection
// dropped since the attempt was sent.
func (o *Core) blame(r *run, outcome error) error {
	if outcome != nil && tripsBreaker(outcome) && !r.sentAt.IsZero() && o.link.droppedSince(r.sentAt) {
		return &errLinkBlip{outcome}
	}
	return outcome
}
