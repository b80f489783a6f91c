package agent

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/chiffon-dev/chiffon/agent/badgercache"
)

// DedupeCache is the Badger dedupe cache an agent opens in its data directory.
type DedupeCache = badgercache.Cache

// OpenDedupeCache opens (or creates) the Badger cache in dir/dedupe. Entries expire
// after ttl.
func OpenDedupeCache(dir string, ttl time.Duration, log *slog.Logger) (*DedupeCache, error) {
	return badgercache.Open(filepath.Join(dir, "dedupe"), badgercache.Options{TTL: ttl, Logger: log})
}
