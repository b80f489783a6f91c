package benchrun

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// rawStatuses is how many status messages the raw responder sends before its reply,
// as an agent sends an acknowledgement and progress before its result.
const rawStatuses = 3

// runRaw measures the NATS baseline: a requester publishes a request of cfg.Size
// bytes with a reply subject under its one wildcard inbox (as the orchestrator's task
// inboxes), and a responder on its own connection answers with rawStatuses statuses
// and a reply of the same size. One at a time for latency, cfg.InFlight at once for
// throughput.
func runRaw(ctx context.Context, url string, cfg Config) (stats, error) {
	req, err := connect(url, "chiffon-bench-raw-requester")
	if err != nil {
		return stats{}, err
	}
	defer req.Close()
	resp, err := connect(url, "chiffon-bench-raw-responder")
	if err != nil {
		return stats{}, err
	}
	defer resp.Close()

	prefix := "chiffonbench.raw." + strconv.FormatInt(time.Now().UnixNano(), 36)
	payload := bytes.Repeat([]byte("x"), cfg.Size)
	rsub, err := resp.Subscribe(prefix+".work", func(m *nats.Msg) {
		for range rawStatuses {
			_ = resp.Publish(m.Reply, payload)
		}
		_ = resp.Publish(m.Reply, payload)
	})
	if err != nil {
		return stats{}, err
	}
	defer rsub.Unsubscribe()

	n := cfg.Tasks
	counts := make([]atomic.Int32, 2*n)
	done := make([]chan struct{}, 2*n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	isub, err := req.Subscribe(prefix+".inbox.*", func(m *nats.Msg) {
		i, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		if err != nil || i < 0 || i >= len(done) {
			return
		}
		if counts[i].Add(1) == rawStatuses+1 {
			close(done[i])
		}
	})
	if err != nil {
		return stats{}, err
	}
	defer isub.Unsubscribe()
	isub.SetPendingLimits(-1, 256<<20)
	if err := req.Flush(); err != nil {
		return stats{}, err
	}
	if err := resp.Flush(); err != nil {
		return stats{}, err
	}

	one := func(base int) func(int) error {
		return func(i int) error {
			i += base
			if err := req.PublishMsg(&nats.Msg{Subject: prefix + ".work", Reply: prefix + ".inbox." + strconv.Itoa(i), Data: payload}); err != nil {
				return err
			}
			select {
			case <-done[i]:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	seq, err := measure(ctx, n, 1, one(0))
	if err != nil {
		return stats{}, err
	}
	par, err := measure(ctx, n, cfg.InFlight, one(n))
	if err != nil {
		return stats{}, err
	}
	if par.perSecond == 0 {
		return stats{}, errors.New("no requests measured")
	}
	return stats{perSecond: par.perSecond, p50: seq.p50, p99: seq.p99, cpuPerOp: par.cpuPerOp}, nil
}
