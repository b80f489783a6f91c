package agent

import (
	"errors"
	"time"

	"github.com/chiffon-dev/chiffon/agent/memcache"
)

// BreakCacheWrites makes every later dedupe cache write of a running agent fail, as a
// full or broken disk would; reads still work. The agent must run on a memcache
// (Config.DedupeCache).
func BreakCacheWrites(a *Agent) {
	a.cache.(*memcache.Cache).FailWrites(errors.New("dedupe cache broken"))
}

// SetRegisterTiming sets how long a's registration first waits for an answer
// before it is sent again (patience), and how long a waits first to send it
// again when no orchestrator is there (retry); before Run.
func SetRegisterTiming(a *Agent, patience, retry time.Duration) {
	a.regPatience, a.regRetry = patience, retry
}
