package core

import (
	"cmp"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/requestsize"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// ErrTooLarge is what every *TooLargeError is (errors.Is).
var ErrTooLarge = api.ErrTooLarge

// TooLargeError says a task's work_request would not fit in one broker message,
// or is over a max_request_bytes of the config (requestsize.TooLargeError).
type TooLargeError = requestsize.TooLargeError

// maxWorkRequest is the largest encoded work_request that both the broker and a
// strict receiver accept, headers aside.
func (o *Core) maxWorkRequest() int {
	m := int(o.nc.MaxPayload()) // 0 until connected
	if m <= 0 || m > envelope.MaxEnvelopeSize {
		m = envelope.MaxEnvelopeSize
	}
	return m - requestsize.HeaderRoom
}

// CheckSize refuses a valid submission whose work_request would not fit in one
// broker message, before anything is stored: sent, it would fail every attempt and
// feed its agent's breaker. It refuses one over its work type's max_request_bytes
// too, and one pinned (hints.agent_id) to an agent whose max_request_bytes it is
// over. The tightest of these limits is the one named. An unpinned task over
// some agents' max_request_bytes goes to the others (pick).
func (o *Core) CheckSize(req *api.SubmitRequest) error {
	limit, source := o.requestLimit(req)
	if n, ok := requestsize.Bound(req.Parameters); ok && n <= limit {
		return nil // the common case: far from the limit, no need to encode it
	}
	size, err := workRequestSize(req.ToAgent, req.WorkType, req.Parameters, req.Hints)
	if err != nil {
		return &api.FieldError{Field: "parameters", Message: "cannot be encoded: " + err.Error()}
	}
	if size > limit {
		o.metrics.TooLarge.Inc()
		o.log.Info("task refused: work_request too large", "to_agent", req.ToAgent, "work_type", req.WorkType,
			"size", size, "limit", limit, "limit_key", cmp.Or(source, "broker max_payload"))
		return &TooLargeError{Size: size, Limit: limit, Source: source}
	}
	return nil
}

// requestLimit is the largest work_request req may have, and the config key
// that sets it ("" for the broker's max payload).
func (o *Core) requestLimit(req *api.SubmitRequest) (limit int, source string) {
	limit = o.maxWorkRequest()
	if n := o.cfg.WorkTypes[req.WorkType].MaxRequestBytes; n > 0 && n < int64(limit) {
		limit, source = int(n), "work_types."+req.WorkType+".max_request_bytes"
	}
	if req.Hints != nil && req.Hints.AgentID != "" {
		if ac := o.known().Config(req.Hints.AgentID); ac != nil && ac.MaxRequestBytes > 0 && ac.MaxRequestBytes < int64(limit) {
			limit, source = int(ac.MaxRequestBytes), "agents["+ac.ID+"].max_request_bytes"
		}
	}
	return limit, source
}

// workRequestSize is the encoded size of the work_request dispatch sends for a
// task of these members: ids have a fixed length, and the timestamp is given
// its longest form (nine fraction digits).
func workRequestSize(to envelope.AgentType, workType string, params map[string]any, hints *task.Hints) (int, error) {
	env := envelope.New(envelope.Orchestrator, to, envelope.NewID(), envelope.NewID(),
		&envelope.WorkRequest{TaskID: envelope.NewID(), WorkType: workType, Parameters: params,
			Hints: hintsEnvelope(hints)})
	env.XCustomFields = gpuFields(hints)
	env.Timestamp = env.Timestamp.Truncate(time.Second).Add(time.Second - time.Nanosecond)
	data, err := envelope.Encode(env)
	return len(data), err
}

// taskSize measures t's work_request for routing (requestsize.Measure): most
// tasks are far below any agent's max_request_bytes, which its bound shows
// without encoding them.
func taskSize(t *task.Task) requestsize.Measure {
	return requestsize.Measure{Params: t.Parameters, Encode: func() (int, error) {
		return workRequestSize(t.ToAgent, t.WorkType, t.Parameters, t.Hints)
	}}
}
