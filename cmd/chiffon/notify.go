package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifySystemd tells systemd how a daemon run by a Type=notify unit is doing
// (sd_notify(3)): READY=1 once ready is closed (a nil ready means at once), STOPPING=1
// when ctx ends (the first SIGTERM) or at stop, whichever comes first, and WATCHDOG=1
// every WatchdogSec/2 (watchdogInterval) until stop, so a long start or drain is not
// taken for a hang. stop ends the goroutine and waits for it. Outside systemd
// (NOTIFY_SOCKET unset) it sends nothing and starts nothing.
func notifySystemd(ctx context.Context, log *slog.Logger, ready <-chan struct{}) (stop func()) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return func() {}
	}
	interval, err := watchdogInterval()
	if err != nil {
		log.Warn("systemd watchdog off", "err", err)
	}
	if ready == nil {
		now := make(chan struct{})
		close(now)
		ready = now
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var tick <-chan time.Time
		if interval > 0 {
			ticker := time.NewTicker(interval)
			defer ticker.Stop()
			tick = ticker.C
		}
		send := func(state string) {
			if _, err := daemon.SdNotify(false, state); err != nil {
				log.Warn("systemd notify", "state", state, "err", err)
			}
		}
		ctxDone := ctx.Done()
		for {
			select {
			case <-ready:
				send(daemon.SdNotifyReady)
				ready = nil
			case <-tick:
				send(daemon.SdNotifyWatchdog)
			case <-ctxDone:
				send(daemon.SdNotifyStopping)
				ctxDone, ready = nil, nil
			case <-quit:
				if ctxDone != nil {
					send(daemon.SdNotifyStopping)
				}
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// watchdogInterval is how often to send WATCHDOG=1: half the unit's WatchdogSec, which
// systemd passes as WATCHDOG_USEC (for this process only when WATCHDOG_PID is its pid).
// It is 0 when the watchdog is off.
func watchdogInterval() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	return d / 2, err
}
