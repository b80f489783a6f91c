package memcache_test

import (
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/agent/dedupe"
	"github.com/chiffon-dev/chiffon/agent/dedupe/cachetest"
	"github.com/chiffon-dev/chiffon/agent/memcache"
)

func TestCacheContract(t *testing.T) {
	cachetest.Run(t, func(_ *testing.T, ttl time.Duration) dedupe.Cache { return memcache.New(ttl) })
}
