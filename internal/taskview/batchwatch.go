package taskview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
)

// How WatchBatch follows a broken batch stream again: after a growing wait, up
// to BatchRetryMax; and gives up after BatchGiveUp without an answer.
var (
	BatchRetryMax = 5 * time.Second
	BatchGiveUp   = 2 * time.Minute
)

// LostError is a batch stream that could not be had again for BatchGiveUp.
type LostError struct {
	Since time.Duration
	Err   error
}

func (e *LostError) Error() string {
	return fmt.Sprintf("no answer from the orchestrator for %s: %v", e.Since.Round(time.Second), e.Err)
}

// Unwrap is the last error met.
func (e *LostError) Unwrap() error { return e.Err }

// WatchBatch hands fn batch id each time it changes, from its event stream,
// until the batch has finished (FinishedAt set), and returns it. A stream that
// breaks or ends early (an orchestrator restarting, a proxy cutting it) is
// opened again after a growing wait, and the batch read with GET meanwhile,
// so that an end missed while away is found.
func WatchBatch(ctx context.Context, c *client.Client, id string, fn func(*api.Batch)) (*api.Batch, error) {
	var (
		last     *api.Batch
		lastJSON []byte
		changed  bool
		answered = time.Now()
		wait     time.Duration
	)
	see := func(b *api.Batch) {
		answered = time.Now()
		data, _ := json.Marshal(b)
		if string(data) != string(lastJSON) {
			lastJSON, last, changed = data, b, true
			fn(b)
		}
	}
	for {
		changed = false
		// The stream ends after the batch's end; the end seen, it is not waited for.
		sctx, stop := context.WithCancel(ctx)
		err := c.BatchEvents(sctx, id, func(b *api.Batch) error {
			see(b)
			if b.FinishedAt != nil {
				stop()
			}
			return nil
		})
		stop()
		if last != nil && last.FinishedAt != nil {
			return last, nil
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if err != nil && !transient(err) {
			return last, err
		}
		if changed {
			wait = 0
		} else {
			wait = min(max(2*wait, 50*time.Millisecond), BatchRetryMax)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(wait):
		}
		b, gerr := c.Batch(ctx, id)
		switch {
		case gerr == nil:
			see(b)
			if b.FinishedAt != nil {
				return b, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case !transient(gerr):
			return last, gerr
		default:
			err = gerr
		}
		if err != nil && time.Since(answered) > BatchGiveUp {
			return last, &LostError{Since: time.Since(answered), Err: err}
		}
	}
}

// transient reports whether err may pass: a connection refused or cut, or a
// server error, not an answer that the request is wrong.
func transient(err error) bool {
	var ae *client.APIError
	switch {
	case errors.As(err, &ae):
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout
	case errors.Is(err, client.ErrBadEvent):
		return false
	}
	return true
}
