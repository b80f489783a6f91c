package jsstore

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// sweepInterval is how often the sweep runs for retention: a quarter of it, at
// most a minute, at least minSweepInterval.
func sweepInterval(retention time.Duration) time.Duration {
	return max(min(retention/4, time.Minute), minSweepInterval)
}

// minSweepInterval keeps a tiny retention from making the sweep spin.
const minSweepInterval = 100 * time.Millisecond

// sweeper sweeps at once, then every sweepInterval, until ctx is cancelled.
func (s *Store) sweeper(ctx context.Context) {
	defer close(s.sweepDone)
	tick := time.NewTicker(sweepInterval(s.retention))
	defer tick.Stop()
	for {
		if n, err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("jsstore: sweep of finished tasks", "stream", s.name, "purged", n, "err", err)
		} else if n > 0 {
			s.log.Debug("jsstore: swept finished tasks", "stream", s.name, "purged", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sweep purges every task whose finish marker is older than the retention: its
// record, events and output, then the marker, so that a sweep cut short leaves
// the marker for the next one. It returns how many tasks it purged.
func (s *Store) sweep(ctx context.Context) (int, error) {
	markers, err := s.markers(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for id, at := range markers {
		if time.Since(at) < s.retention {
			continue
		}
		if err := s.purge(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// purge removes everything stored of task id, its finish marker last.
func (s *Store) purge(ctx context.Context, id string) error {
	for _, subj := range []string{
		s.taskSubject(id),
		s.prefix + ".e." + id + ".>",
		s.prefix + ".o." + id + ".>",
		s.markerSubject(id),
	} {
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := s.stream.Purge(pctx, jetstream.WithPurgeSubject(subj))
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
