package agent

import (
	"errors"

	"github.com/chiffon-dev/chiffon/agent/memcache"
)

// BreakCacheWrites makes every later dedupe cache write of a running agent fail, as a
// full or broken disk would; reads still work. The agent must run on a memcache
// (Config.DedupeCache).
func BreakCacheWrites(a *Agent) {
	a.cache.(*memcache.Cache).FailWrites(errors.New("dedupe cache broken"))
}
