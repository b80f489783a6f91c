package orchestrator

// BreakStoreWrites makes every later task store write of an open orchestrator fail,
// as a full or broken disk would; reads still work.
func BreakStoreWrites(o *Orchestrator) { o.st.w.Close() }
