package badgercache_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent/badgercache"
	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/agent/dedupe/cachetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Badger's and glog's package-level goroutines outlive any one DB.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
	)
}

func TestCacheContract(t *testing.T) {
	cachetest.Run(t, func(t *testing.T, ttl time.Duration) dedupe.Cache {
		c, err := badgercache.Open(t.TempDir(), badgercache.Options{TTL: ttl,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
