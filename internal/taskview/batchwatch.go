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

// How WatchBatch and WatchRun follow a broken event stream again: after a
// growing wait, up to BatchRetryMax; and give up after BatchGiveUp without an
// answer.
var (
	BatchRetryMax = 5 * time.Second
	BatchGiveUp   = 2 * time.Minute
)

// LostError is a batch's or a run's stream that could not be had again for
// BatchGiveUp.
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
	return watch(ctx, followed[*api.Batch]{
		stream: func(ctx context.Context, see func(*api.Batch) error) error { return c.BatchEvents(ctx, id, see) },
		get:    func(ctx context.Context) (*api.Batch, error) { return c.Batch(ctx, id) },
		ended:  func(b *api.Batch) bool { return b.FinishedAt != nil },
	}, fn)
}

// followed is what watch follows: its event stream, read once until it ends,
// its read, and whether a value of it is the end.
type followed[T any] struct {
	stream func(ctx context.Context, see func(T) error) error
	get    func(ctx context.Context) (T, error)
	ended  func(T) bool
}

// watch hands fn what f follows each time it changes until it has ended, and
// returns it: the stream opened again when it breaks, f read meanwhile.
func watch[T any](ctx context.Context, f followed[T], fn func(T)) (T, error) {
	var (
		last     T
		seen     bool
		lastJSON []byte
		changed  bool
		answered = time.Now()
		wait     time.Duration
	)
	see := func(v T) {
		answered = time.Now()
		data, _ := json.Marshal(v)
		if string(data) != string(lastJSON) {
			lastJSON, last, seen, changed = data, v, true, true
			fn(v)
		}
	}
	for {
		changed = false
		// The stream ends after the end; the end seen, it is not waited for.
		sctx, stop := context.WithCancel(ctx)
		err := f.stream(sctx, func(v T) error {
			see(v)
			if f.ended(v) {
				stop()
			}
			return nil
		})
		stop()
		if seen && f.ended(last) {
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
		v, gerr := f.get(ctx)
		switch {
		case gerr == nil:
			see(v)
			if f.ended(v) {
				return v, nil
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
