package core

import "github.com/chiffon-dev/chiffon/orchestrator/task"

// initMetrics counts the stored tasks by state.
func (o *Core) initMetrics() error {
	for _, s := range task.States {
		o.metrics.Tasks.WithLabelValues(string(s)).Set(0)
	}
	_, err := o.st.Tasks(func(t *task.Task) bool {
		o.metrics.Tasks.WithLabelValues(string(t.State)).Inc()
		return false
	}, 0)
	return err
}
