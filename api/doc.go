// Package api holds the wire types of Chiffon's HTTP API: what a client sends
// (a task, a batch, a schedule, a decision) and what it gets back besides the
// task records of package task (agents, batches, schedules, readiness, errors).
// It imports nothing that talks to NATS or a store, so the client and the
// dashboard can use it without either.
package api
