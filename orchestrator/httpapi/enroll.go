package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// Enrollments is what the API needs to enroll, join and revoke agent hosts
// (package enroll); a nil one answers each route with 409 no_enrollment.
type Enrollments interface {
	// Enroll makes a one-time join code: an *api.FieldError, api.ErrEnrolled.
	Enroll(ctx context.Context, req api.EnrollRequest, caller string) (*api.EnrollCode, error)
	// Enrollments lists the enrollments.
	Enrollments() ([]api.Enrollment, error)
	// Enrollment returns agent id's, or task.ErrNotFound.
	Enrollment(id string) (*api.Enrollment, error)
	// Join joins a host with a code, from the address from: the api.ErrJoin*
	// errors, an *api.FieldError.
	Join(req api.JoinRequest, from string) (*api.JoinGrant, error)
	// Revoke revokes agent id: task.ErrNotFound, api.ErrRevoked.
	Revoke(ctx context.Context, id, caller string) (*api.Enrollment, error)
}

// routeEnrollments serves the enrollment endpoints. Operators enroll and
// revoke, viewers read; a join carries no API token, only its code, and is
// served by the leader alone (a standby cannot forward a request without a
// token: it answers 503 and the host tries the leader).
func (a *API) routeEnrollments(route func(string, http.HandlerFunc)) {
	route("POST /api/v1/enrollments", operatorOnly(a.leaderOnly(func(w http.ResponseWriter, r *http.Request) {
		var req api.EnrollRequest
		if !decodeBody(w, r, &req) || !a.enrolls(w) {
			return
		}
		code, err := a.enroll.Enroll(r.Context(), req, CallerOf(r.Context()))
		if err != nil {
			writeEnrollErr(w, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Location", "/api/v1/enrollments/"+code.Enrollment.AgentID)
		writeJSON(w, http.StatusCreated, code)
	})))
	route("GET /api/v1/enrollments", func(w http.ResponseWriter, _ *http.Request) {
		if !a.enrolls(w) {
			return
		}
		list, err := a.enroll.Enrollments()
		answerEnroll(w, list, err)
	})
	route("GET /api/v1/enrollments/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !a.enrolls(w) {
			return
		}
		en, err := a.enroll.Enrollment(r.PathValue("id"))
		answerEnroll(w, en, err)
	})
	route("POST /api/v1/agents/{id}/revoke", operatorOnly(a.leaderOnly(func(w http.ResponseWriter, r *http.Request) {
		if !a.enrolls(w) {
			return
		}
		en, err := a.enroll.Revoke(r.Context(), r.PathValue("id"), CallerOf(r.Context()))
		answerEnroll(w, en, err)
	})))
}

// apiJoin serves a host's join: no token, the code is the credential.
func (a *API) apiJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if !decodeBody(w, r, &req) || !a.enrolls(w) {
		return
	}
	if !a.serving() {
		writeUnavailable(w, "this orchestrator is a standby: join through the leader")
		return
	}
	from, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		from = r.RemoteAddr
	}
	grant, err := a.enroll.Join(req, from)
	if err != nil {
		a.authLog.Warn("join refused", "from", from, "err", err)
		writeEnrollErr(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, grant)
}

// answerEnroll answers v with 200, or err as an enrollment's error.
func answerEnroll(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeEnrollErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// enrolls answers 409 when the orchestrator cannot enroll.
func (a *API) enrolls(w http.ResponseWriter) bool {
	if a.enroll == nil {
		writeError(w, http.StatusConflict, "no_enrollment", "", api.ErrNoEnrollment.Error())
		return false
	}
	return true
}

// writeEnrollErr answers an enrollment's error.
func writeEnrollErr(w http.ResponseWriter, err error) {
	var status int
	var code string
	switch {
	case errors.Is(err, task.ErrNotFound):
		status, code = http.StatusNotFound, "not_found"
	case errors.Is(err, api.ErrJoinCodeUnknown):
		status, code = http.StatusForbidden, "unknown_code"
	case errors.Is(err, api.ErrJoinCodeUsed):
		status, code = http.StatusForbidden, "code_used"
	case errors.Is(err, api.ErrJoinCodeRevoked):
		status, code = http.StatusForbidden, "code_revoked"
	case errors.Is(err, api.ErrJoinCodeExpired):
		status, code = http.StatusForbidden, "code_expired"
	case errors.Is(err, api.ErrJoinOtherAgent):
		status, code = http.StatusForbidden, "other_agent"
	case errors.Is(err, api.ErrEnrolled):
		status, code = http.StatusConflict, "agent_exists"
	case errors.Is(err, api.ErrRevoked):
		status, code = http.StatusConflict, "revoked"
	case errors.Is(err, api.ErrNoKey):
		status, code = http.StatusConflict, "no_key"
	default:
		writeRequestErr(w, err)
		return
	}
	writeError(w, status, code, "", err.Error())
}
