package agent

import (
	"fmt"
	"time"
)

// treeStop is how a task's processes were stopped when its context ended before
// its main process exited: SIGTERM, then SIGKILL for what still runs after the
// work type's cancel_grace (SIGKILL at once when it is 0). The zero value is a
// tree that was not stopped.
type treeStop struct {
	grace  time.Duration // cancel_grace
	termAt time.Time     // when SIGTERM was sent; zero when it was not
	mainAt time.Time     // when the main process exited after SIGTERM, within the grace
	goneAt time.Time     // when none of the tree ran any more, within the grace
	killAt time.Time     // when SIGKILL was sent to what still ran
}

// stopped reports whether the tree was signalled because its context ended.
func (s *treeStop) stopped() bool { return !s.termAt.IsZero() || !s.killAt.IsZero() }

// waiting reports whether the main process exited within the grace after SIGTERM
// and the rest of the tree may still have the rest of it.
func (s *treeStop) waiting() bool {
	return !s.termAt.IsZero() && s.goneAt.IsZero() && s.killAt.IsZero()
}

// ended records, for a waiting stop, that the tree is gone, or that some of it
// still ran after the grace and is SIGKILLed.
func (s *treeStop) ended(killed bool) {
	switch {
	case !s.waiting():
	case killed:
		s.killAt = time.Now()
	default:
		s.goneAt = time.Now()
	}
}

// String says what happened, for the task's output; "" when the tree was not
// stopped.
func (s *treeStop) String() string {
	const term = "SIGTERM sent to the process group; "
	switch {
	case !s.stopped():
		return ""
	case s.termAt.IsZero():
		return "SIGKILL sent to the process group at once (cancel_grace is 0)"
	case s.killAt.IsZero():
		return term + fmt.Sprintf("it exited %v later", roughly(s.goneAt.Sub(s.termAt)))
	case s.mainAt.IsZero():
		return term + fmt.Sprintf("still running after the %v cancel_grace: SIGKILLed", s.grace)
	}
	return term + fmt.Sprintf("its main process exited %v later, the rest still ran after the %v cancel_grace: SIGKILLed",
		roughly(s.mainAt.Sub(s.termAt)), s.grace)
}

// roughly rounds d for a person: to the millisecond under a second, else to a
// tenth of a second.
func roughly(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
