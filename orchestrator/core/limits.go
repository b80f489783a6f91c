package core

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// headerRoom is what a message keeps of the broker's max_payload for its NATS
// headers (the auth token and agent id), as agent/stream.go's maxMessage does.
const headerRoom = 1024

// ErrTooLarge is what every *TooLargeError is (errors.Is).
var ErrTooLarge = api.ErrTooLarge

// TooLargeError says a task's work_request would not fit in one broker message,
// or is over a max_request_bytes of the config. A submission refused with it was
// neither stored nor sent.
type TooLargeError struct {
	// Size is the encoded work_request, in bytes.
	Size int
	// Limit is the largest work_request accepted, in bytes.
	Limit int
	// Source is the config key of the limit, such as
	// "work_types.build.max_request_bytes" or "agents[code-1].max_request_bytes";
	// "" for the broker's max payload.
	Source string
}

// Error names the size and the limit, and where the limit comes from.
func (e *TooLargeError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("work_request would be %d bytes, over %s (%d bytes)", e.Size, e.Source, e.Limit)
	}
	return fmt.Sprintf("work_request would be %d bytes, over the limit of %d bytes (one broker message less %d for headers)",
		e.Size, e.Limit, headerRoom)
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// maxWorkRequest is the largest encoded work_request that both the broker and a
// strict receiver accept, headers aside.
func (o *Core) maxWorkRequest() int {
	m := int(o.nc.MaxPayload()) // 0 until connected
	if m <= 0 || m > envelope.MaxEnvelopeSize {
		m = envelope.MaxEnvelopeSize
	}
	return m - headerRoom
}

// CheckSize refuses a valid submission whose work_request would not fit in one
// broker message, before anything is stored: sent, it would fail every attempt and
// feed its agent's breaker. It refuses one over its work type's max_request_bytes
// too, and one pinned (hints.agent_id) to an agent whose max_request_bytes it is
// over. The tightest of these limits is the one named. An unpinned task over
// some agents' max_request_bytes goes to the others (pick).
func (o *Core) CheckSize(req *api.SubmitRequest) error {
	limit, source := o.requestLimit(req)
	if n, ok := paramsBound(req.Parameters); ok && n+envelopeRoom <= limit {
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
		if ac := o.cfg.AgentConfig(req.Hints.AgentID); ac != nil && ac.MaxRequestBytes > 0 && ac.MaxRequestBytes < int64(limit) {
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

// taskSize measures a task's work_request for routing, at most once: most
// tasks are far below any agent's max_request_bytes, which paramsBound shows
// without encoding them.
type taskSize struct {
	t *task.Task
	// bound is paramsBound's bound of the whole work_request, or -1 when it has
	// none; n is the encoded size once measured (-1: it cannot be encoded).
	bound, n          int
	bounded, measured bool
}

// over reports whether the task's work_request is over limit bytes.
func (s *taskSize) over(limit int64) bool {
	if !s.bounded {
		s.bounded, s.bound = true, -1
		if b, ok := paramsBound(s.t.Parameters); ok {
			s.bound = b + envelopeRoom
		}
	}
	if s.bound >= 0 && int64(s.bound) <= limit {
		return false
	}
	if !s.measured {
		s.measured = true
		n, err := workRequestSize(s.t.ToAgent, s.t.WorkType, s.t.Parameters, s.t.Hints)
		if err != nil {
			n = -1 // it fails at dispatch, as it would without the limit
		}
		s.n = n
	}
	return int64(s.n) > limit
}

// envelopeRoom bounds a work_request's encoding without its parameters: the
// envelope's members, a work type of at most 64 bytes and the hints.
const envelopeRoom = 1024

// paramsBound is an upper bound of the encoded size of parameters decoded from
// JSON (or built of the same types), with no encoding: each byte of a string
// encodes to at most 6 ("\u001f"). ok is false for a value of another type, whose
// size only encoding tells.
func paramsBound(v any) (n int, ok bool) {
	switch v := v.(type) {
	case nil:
		return 4, true
	case bool:
		return 5, true
	case string:
		return 6*len(v) + 2, true
	case json.Number:
		return len(v), true
	case float64, int, int64:
		return 24, true
	case map[string]any:
		n = 2
		for k, x := range v {
			m, ok := paramsBound(x)
			if !ok {
				return 0, false
			}
			n += 6*len(k) + 4 + m
		}
		return n, true
	case []any:
		n = 2
		for _, x := range v {
			m, ok := paramsBound(x)
			if !ok {
				return 0, false
			}
			n += m + 1
		}
		return n, true
	}
	return 0, false
}
