package core

import (
	"context"
	"errors"
	"time"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/sony/gobreaker/v2"
)

// tripsBreaker reports whether err counts against an agent's breaker: only 5001 and
// 5002 say the agent is unhealthy; other errors show it answering.
func tripsBreaker(err error) bool {
	return errors.Is(err, errcodes.Timeout) || errors.Is(err, errcodes.AgentUnavailable)
}

// errNeverReached is the outcome of an attempt that reached no agent (NATS's "no
// responders"): it proves nothing about the agent's health, so its breaker neither
// counts it as a failure nor as a success.
var errNeverReached = errors.New("the work_request reached no agent (no responders)")

// newBreaker builds a's circuit breaker. Its state changes are applied on the loop,
// after the call into the breaker that made them (which holds the breaker's lock).
func (o *Core) newBreaker(a *agentEntry) *gobreaker.TwoStepCircuitBreaker[struct{}] {
	failures := o.cfg.Breaker.Failures
	var cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:    a.id,
		Timeout: o.cfg.Breaker.OpenFor,
		// gobreaker's default trips on the 6th failure; the protocol says 5.
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsSuccessful: func(err error) bool { return err == nil || !tripsBreaker(err) },
		IsExcluded: func(err error) bool {
			var blip *errLinkBlip
			return errors.Is(err, errNeverReached) || errors.As(err, &blip)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			o.post(func() {
				if a.breaker == cb { // not one resetBreaker replaced, reached by a late outcome
					o.breakerChanged(a, from, to)
				}
			})
		},
	})
	return cb
}

// resetBreaker gives a a new, closed breaker: a registration means a process that
// listens again, so the failures of before say nothing of it.
func (o *Core) resetBreaker(a *agentEntry) {
	from := a.breaker.State()
	a.breaker = o.newBreaker(a)
	if from == gobreaker.StateClosed {
		return
	}
	if a.ping != nil {
		a.ping.Stop()
		a.ping = nil
	}
	o.breakerChanged(a, from, gobreaker.StateClosed)
}

// breakerChanged logs a breaker's move, updates its metric, schedules the half-open
// ping when it opens and releases queued work when it closes.
func (o *Core) breakerChanged(a *agentEntry, from, to gobreaker.State) {
	o.log.Warn("circuit breaker "+to.String(), "agent_id", a.id, "from", from.String())
	o.metrics.Breaker.WithLabelValues(a.id).Set(float64(to))
	switch to {
	case gobreaker.StateOpen:
		if a.ping != nil {
			a.ping.Stop()
		}
		o.pingLater(a, o.cfg.Breaker.OpenFor)
	case gobreaker.StateClosed:
		o.drain(a.typ)
	}
}

// pingLater arms a's half-open ping.
func (o *Core) pingLater(a *agentEntry, after time.Duration) {
	a.ping = time.AfterFunc(after, func() { o.post(func() { o.halfOpenPing(a) }) })
}

// halfOpenPing sends the one ping a half-open breaker lets through; a control_ack
// with ok closes the breaker, anything else opens it again.
func (o *Core) halfOpenPing(a *agentEntry) {
	if o.closed || a.breaker.State() == gobreaker.StateClosed {
		// A registration closed it (resetBreaker) as this ping came due.
		return
	}
	done, err := a.breaker.Allow()
	if err != nil {
		// Not half-open yet (timer and breaker clocks differ slightly): try soon.
		o.pingLater(a, o.cfg.Breaker.OpenFor/10+time.Millisecond)
		return
	}
	env := envelope.New(envelope.Orchestrator, a.typ, "", "", &envelope.Ping{})
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		rep, err := o.request(context.Background(), a.id, env)
		if err == nil {
			if ack, ok := rep.Payload.(*envelope.ControlAck); !ok || !ack.OK {
				err = errcodes.New(errcodes.AgentUnavailable, "ping not acknowledged")
			}
		}
		if err != nil && !tripsBreaker(err) {
			err = errcodes.New(errcodes.AgentUnavailable, "ping failed: %v", err)
		}
		if err != nil {
			o.log.Warn("half-open ping failed", "agent_id", a.id, "err", err)
		}
		o.post(func() { done(err) })
	}()
}
