package orchestrator

import (
	"context"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/httpapi"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// apiBackend is the orchestrator as its HTTP API sees it (httpapi.Backend and
// httpapi.Fleet): the calls that act take the caller, the API token that asked,
// which the orchestrator's own methods leave out.
type apiBackend struct{ *Orchestrator }

// newAPI builds the HTTP API over o, and mounts pages beside it when given.
func (o *Orchestrator) newAPI(pages func(http.Handler, func(string) (string, bool), string) (http.Handler, error)) error {
	b := apiBackend{o}
	p := httpapi.Params{
		Backend: b, Fleet: b, Store: o.st, Tokens: o.sec.apiTokens,
		Limits: o.cfg.HTTP.Limits, Metrics: o.metrics.Handler(),
		InGroup: o.cfg.HA.Enabled, Serving: o.serving, Done: o.done,
		Log: o.log, AuthLog: o.authLog,
		Forward: httpapi.Forward{Conn: o.nc, Requester: o.req, Subjects: o.subj, OrchID: o.id,
			Signer: httpapi.NewSigner(o.sec.apiTokens[0].Secret)},
	}
	if o.enroller != nil { // without one, the API answers 409 no_enrollment
		p.Enrollments = b
	}
	o.api = httpapi.New(p)
	if pages == nil {
		return nil
	}
	return o.api.MountPages(o.cfg.UI.path(), pages)
}

// Submit is Orchestrator.Submit on behalf of caller.
func (b apiBackend) Submit(_ context.Context, req api.SubmitRequest, caller string) (*task.Task, error) {
	c, err := b.core()
	if err != nil {
		return nil, err
	}
	return c.Submit(req, caller)
}

// Cancel is Orchestrator.Cancel on behalf of caller.
func (b apiBackend) Cancel(_ context.Context, id, reason, caller string) (*task.Task, error) {
	c, err := b.core()
	if err != nil {
		return nil, err
	}
	return c.Cancel(id, reason, caller)
}

// Decide is Orchestrator.Decide on behalf of caller.
func (b apiBackend) Decide(_ context.Context, id string, approve bool, note, caller string) (*task.Task, error) {
	c, err := b.core()
	if err != nil {
		return nil, err
	}
	return c.Decide(id, approve, note, caller)
}

// CreateBatch is Orchestrator.CreateBatch on behalf of caller.
func (b apiBackend) CreateBatch(_ context.Context, req api.BatchRequest, caller string) (*api.Batch, error) {
	return b.fleet.CreateBatch(req, caller)
}

// DecideBatch is Orchestrator.DecideBatch on behalf of caller.
func (b apiBackend) DecideBatch(_ context.Context, id string, approve bool, note, caller string) (*api.Batch, error) {
	if err := core.CheckNote(note); err != nil {
		return nil, err
	}
	return b.fleet.DecideBatch(id, approve, caller, note)
}

// WaitWritten waits until every write of live task id so far is committed.
func (b apiBackend) WaitWritten(id string) {
	if c := b.running.Load(); c != nil {
		c.WaitWritten(id)
	}
}

// BatchIDs returns the ids of the batches a short id or a prefix names.
func (b apiBackend) BatchIDs(part string, limit int) ([]string, error) {
	return b.fleet.BatchIDs(part, limit)
}

// BatchChanges returns a channel closed at the next change of a batch.
func (b apiBackend) BatchChanges() <-chan struct{} { return b.fleet.Changes() }

// Watch starts a live stream of task id's events (core.Core.Watch); none
// when no core runs it.
func (b apiBackend) Watch(id string, buffer int) (<-chan *task.Event, func()) {
	c := b.running.Load()
	if c == nil {
		return nil, nil
	}
	w := c.Watch(id, buffer)
	if w == nil {
		return nil, nil
	}
	return w.Events(), w.Stop
}
