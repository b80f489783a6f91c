package badgercache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/envelope"
)

func benchCache(b *testing.B) *Cache {
	b.Helper()
	c, err := Open(b.TempDir(), Options{TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// put writes e and waits for the commit, as a test wants it.
func (c *Cache) put(requestID string, e *dedupe.Entry) error {
	done := make(chan error, 1)
	c.Start(requestID, e, func(err error) { done <- err })
	return <-done
}

func benchEntry() *dedupe.Entry {
	return &dedupe.Entry{State: dedupe.Running, TaskID: envelope.NewID(), WorkType: "run_playbook", StartedAt: time.Now()}
}

// BenchmarkDedupeLookup is the check every work_request makes: a miss, then a hit.
func BenchmarkDedupeLookup(b *testing.B) {
	c := benchCache(b)
	known := envelope.NewID()
	if err := c.put(known, benchEntry()); err != nil {
		b.Fatal(err)
	}
	b.Run("miss", func(b *testing.B) {
		id := envelope.NewID()
		b.ReportAllocs()
		for b.Loop() {
			if e, err := c.Get(id); err != nil || e != nil {
				b.Fatal(e, err)
			}
		}
	})
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if e, err := c.Get(known); err != nil || e == nil {
				b.Fatal(e, err)
			}
		}
	})
}

// BenchmarkDedupeWrite is the running entry written before a handler starts, and a
// finished entry with 64 KiB and 10 MiB of output.
func BenchmarkDedupeWrite(b *testing.B) {
	c := benchCache(b)
	b.Run("running", func(b *testing.B) {
		e := benchEntry()
		b.ReportAllocs()
		for b.Loop() {
			if err := c.put(envelope.NewID(), e); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As the agent writes them: the next request is taken while earlier entries
	// commit, 64 at most outstanding.
	b.Run("running_pipelined", func(b *testing.B) {
		e := benchEntry()
		slots := make(chan struct{}, 64)
		errs := make(chan error, 64)
		b.ReportAllocs()
		for b.Loop() {
			slots <- struct{}{}
			c.Start(envelope.NewID(), e, func(err error) {
				if err != nil {
					errs <- err
				}
				<-slots
			})
		}
		for range cap(slots) {
			slots <- struct{}{}
		}
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	})
	for _, size := range []int{64 << 10, 10 << 20} {
		b.Run(fmt.Sprintf("finished_%dKiB", size>>10), func(b *testing.B) { benchFinish(b, c, size) })
	}
}

func benchFinish(b *testing.B, c *Cache, size int) {
	out := strings.Repeat("x", size)
	b.ReportAllocs()
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		e := benchEntry()
		e.Result = &envelope.WorkResult{TaskID: e.TaskID, Status: envelope.ResultSuccess}
		if err := c.Finish(envelope.NewID(), e, out); err != nil {
			b.Fatal(err)
		}
	}
}
