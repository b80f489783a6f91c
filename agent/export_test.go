package agent

// BreakCacheWrites makes every later dedupe cache write of a running agent fail, as a
// full or broken disk would; reads still work.
func BreakCacheWrites(a *Agent) { a.cache.w.Close() }
