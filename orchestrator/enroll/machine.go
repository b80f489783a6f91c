package enroll

import (
	"time"

	"github.com/chiffon-dev/chiffon/api"
)

// event is what happens to an enrollment.
type event int

const (
	// joinEvent: a host presents the code.
	joinEvent event = iota + 1
	// revokeEvent: an operator revokes the id (or the unused code).
	revokeEvent
)

// stateAt is rec's state at now: a pending code past its expiry is expired.
func stateAt(rec *record, now time.Time) api.EnrollState {
	if rec.State == api.EnrollPending && !now.Before(rec.ExpiresAt) {
		return api.EnrollExpired
	}
	return rec.State
}

// decide is the enrollment machine: the state ev leads to from state, or why
// it is refused. Only a pending code joins, once; any state but revoked is
// revoked.
//
//	state \ event | join                    | revoke
//	pending       | joined                  | revoked (the code is void)
//	expired       | ErrJoinCodeExpired      | revoked
//	joined        | ErrJoinCodeUsed         | revoked (identity revoked at the broker, agent forgotten)
//	revoked       | ErrJoinCodeRevoked      | ErrRevoked
func decide(state api.EnrollState, ev event) (api.EnrollState, error) {
	switch ev {
	case joinEvent:
		switch state {
		case api.EnrollPending:
			return api.EnrollJoined, nil
		case api.EnrollExpired:
			return state, api.ErrJoinCodeExpired
		case api.EnrollRevoked:
			return state, api.ErrJoinCodeRevoked
		default:
			return state, api.ErrJoinCodeUsed
		}
	case revokeEvent:
		if state == api.EnrollRevoked {
			return state, api.ErrRevoked
		}
		return api.EnrollRevoked, nil
	}
	return state, nil
}
