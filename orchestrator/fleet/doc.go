// Package fleet runs the orchestrator's batches and schedules: a client of the
// core's Go API (Core) and of the task store's records (Records), started and
// stopped with the core (Fleet's Start and Stop).
//
// At its centre are the fleet's two machines, the batch's and the schedule's:
// pure functions that decide, from records read and the clock alone, what a
// batch's runner or the schedules' clock does next, and return it as effects
// (batch.go, schedule.go). The runners (batchrun.go, schedrun.go) read the
// store, call DecideBatch or DecideSchedule, and carry out the effects; the
// calls that make and change batches and schedules are batches.go and
// schedules.go. Package orchestrator implements Core and hands its batch and
// schedule methods to a Fleet; this package never imports it.
package fleet
