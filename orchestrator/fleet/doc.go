// Package fleet holds the fleet's two machines, the batch's and the schedule's:
// pure functions that decide, from records read and the clock alone, what a
// batch's runner or the schedules' clock does next, and return it as effects.
// They read and write nothing: the runners in package orchestrator read the
// store, call DecideBatch or DecideSchedule, and carry out the effects.
package fleet
