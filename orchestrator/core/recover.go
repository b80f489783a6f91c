package core

import "github.com/chiffon-dev/chiffon/orchestrator/task"

// replayStatuses brings a recovered task's steps and progress up to date with its
// events, and returns the number of the last one. A status is stored without the
// task's record (see machine.status), so the record may miss the last of them.
func (o *Core) replayStatuses(t *task.Task) (int64, error) {
	var last int64
	err := o.st.Events(t.ID, 0, func(ev *task.Event) error {
		last = ev.Seq
		if ev.Type == task.EventStatus && ev.Status != nil {
			t.ProgressPercent = ev.Status.ProgressPercent
			updateStep(t, ev.Status, ev.At)
		}
		return nil
	})
	return last, err
}

// recover resumes every unfinished task found in the store (see machine.resume),
// oldest first, with its history and the output already held.
func (o *Core) recover() error {
	tasks, err := o.st.Unfinished()
	if err != nil {
		return err
	}
	runs := make([]*run, 0, len(tasks))
	for _, t := range tasks {
		r := o.newRun(t)
		if r.seq, err = o.replayStatuses(t); err != nil {
			return err
		}
		spans, err := o.st.OutputSpans(t.ID)
		if err != nil {
			return err
		}
		for _, s := range spans {
			r.out.Add(s)
		}
		t.OutputBytes = r.out.Contiguous()
		runs = append(runs, r)
	}
	return o.call(func() {
		for _, r := range runs {
			o.runs[r.t.ID] = r // initMetrics counted it
			o.deliver(r, resumed{})
		}
	})
}
