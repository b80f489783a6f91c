package fleet

import (
	"maps"
	"slices"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// BatchIDs returns the ids of the batches that part, a short id or a prefix
// (task.ParseIDRef), names, in order, at most limit (0: all). It reads every
// batch's record, as Batches does.
func (f *Fleet) BatchIDs(part string, limit int) ([]string, error) {
	recs, err := f.st.Records(BatchRecord)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(recs)) {
		if task.MatchesID(id, part) && (limit <= 0 || len(out) < limit) {
			out = append(out, id)
		}
	}
	return out, nil
}
