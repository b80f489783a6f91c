package orchestrator

import (
	"time"
)

// replayStatuses brings a recovered task's steps and progress up to date with its
// events, and returns the number of the last one. A status is stored without the
// task's record (saveStatus), so the record may miss the last of them.
func (o *Orchestrator) replayStatuses(t *Task) (int64, error) {
	var last int64
	err := o.st.Events(t.ID, 0, func(ev *Event) error {
		last = ev.Seq
		if ev.Type == EventStatus && ev.Status != nil {
			t.ProgressPercent = ev.Status.ProgressPercent
			o.updateStep(t, ev.Status, ev.At)
		}
		return nil
	})
	return last, err
}

// recover resumes every unfinished task found in the store. One that reached an agent
// is sent again to that agent with its request_id, whose cache answers; one that did
// not is queued until the agents register.
func (o *Orchestrator) recover() error {
	tasks, err := o.st.Unfinished()
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range tasks { // oldest first
		r := o.newRun(t)
		if r.seq, err = o.replayStatuses(t); err != nil {
			return err
		}
		pieces, err := o.st.OutputSpans(t.ID)
		if err != nil {
			return err
		}
		for _, p := range pieces {
			r.out.Add(p)
		}
		t.OutputBytes = r.out.Contiguous()
		o.runs[t.ID] = r
		log := r.log
		if t.CancelRequested && t.State == StatePending {
			o.finish(r, StateCancelled, nil, "cancelled")
			continue
		}
		_ = o.save(r, &Event{Type: EventState, Message: "resumed after orchestrator restart"})
		if t.AgentID != "" {
			log.Info("resuming task on its agent", "agent_id", t.AgentID, "state", t.State)
			r.stick = t.AgentID
			if mayHaveStarted(t) {
				r.pinned = t.AgentID
			}
			o.schedule(r)
			continue
		}
		// Never dispatched: it waits in its type's queue, which the agents'
		// registrations drain. Routing it before they have registered would cost it a
		// retry (5002 "no online agent") for no fault of theirs. When none of its type
		// has registered after the ack timeout, it is routed as a new task would be.
		log.Info("resuming task: queued until its agents register", "state", t.State)
		o.enqueue(r)
		r.retry = time.AfterFunc(o.cfg.Timeouts.Ack, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if r.queued && !r.finished && !o.closed && !o.anyOnline(r.t.ToAgent) {
				o.unqueue(r)
				o.schedule(r)
			}
		})
	}
	return nil
}
