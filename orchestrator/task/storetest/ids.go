package storetest

import (
	"slices"
	"testing"

	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Ids of tasks made in the same minute: their beginnings are alike, their ends
// differ; the last one ends as the others begin.
const (
	idA = "01a21b10-c6bc-7000-8000-00000000aaaa"
	idB = "01a21b10-c6bc-7000-8000-11110000bbbb"
	idC = "01a21b10-c6bd-7000-8000-22222222cccc"
	idD = "99999999-0000-7000-8000-000001a21b10"
)

// TaskIDs finds tasks by a short id, the end of an id, or a prefix, in order,
// bounded by its limit.
func testTaskIDsByShortIDOrPrefix(t *testing.T, open Open) {
	s := openStore(t, open, 0)
	for i, id := range []string{idC, idA, idD, idB} {
		tk := newTask(i, task.StatePending)
		tk.ID = id
		save(t, s, &task.Write{ID: id, Task: tk})
	}
	tests := []struct {
		part  string
		limit int
		want  []string
	}{
		{"0000aaaa", 0, []string{idA}},
		{"22222222cccc", 0, []string{idC}},
		{"01a21b10-c6bc", 0, []string{idA, idB}},
		{"01a21b10-c6bd-7000-8000-2222", 0, []string{idC}},
		{"01a21b10", 0, []string{idA, idB, idC, idD}}, // a prefix of three, the short id of one
		{"01a21b10", 2, []string{idA, idB}},
		{"deadbeef", 0, nil},
		{"01a21b11", 0, nil},
	}
	for _, tc := range tests {
		got, err := s.TaskIDs(tc.part, tc.limit)
		if err != nil {
			t.Fatalf("TaskIDs(%q, %d): %v", tc.part, tc.limit, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("TaskIDs(%q, %d) = %v, want %v", tc.part, tc.limit, got, tc.want)
		}
	}
}

// wantTaskIDs checks TaskIDs(part, 0) is want.
func wantTaskIDs(t *testing.T, s task.Store, part string, want ...string) {
	t.Helper()
	got, err := s.TaskIDs(part, 0)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("TaskIDs(%q) = %v, %v; want %v", part, got, err, want)
	}
}
