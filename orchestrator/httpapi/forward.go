package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// A standby forwards the API requests that need the core (a submit, a cancel, the
// agent list, the webhook deliveries, and what makes batches and workflow runs
// or changes schedules and workflows) to the leader: one NATS request on
// OrchAPI, which only the leader subscribes to and only orchestrators may use
// (broker permissions). The request
// carries the HTTP method, path and Authorization header, with the body as its
// data; the leader serves it with its own API, which checks the token again, and
// answers the status, the headers a client reads and the body. Nothing is
// retried: a submit forwarded once creates its task once.
//
// The answer comes on a subject under ForwardReplies, where only orchestrators
// may publish, ending in a nonce from crypto/rand (broker.Requester); and it is
// signed with a key derived from the operator's API token, which every
// orchestrator of the group holds: the standby passes on only an answer that
// bears the signature of its exact subject, status, headers and body.

// Headers of a forwarded request and its answer.
const (
	hdrFwdMethod = "Chiffon-Method"
	hdrFwdPath   = "Chiffon-Path"
	hdrFwdStatus = "Chiffon-Status"
	hdrFwdSig    = "Chiffon-Signature"
)

// forwardTimeout bounds the leader's answer to a forwarded request.
const forwardTimeout = 30 * time.Second

// forwardedHeaders are the answer's headers a standby passes on.
var forwardedHeaders = []string{"Content-Type", "Location", "Retry-After", "WWW-Authenticate"}

// leaderOnly serves h when this orchestrator runs the core, and forwards the
// request to the leader otherwise.
func (a *API) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.serving() {
			h(w, r)
			return
		}
		a.forward(w, r)
	}
}

// forward sends r to the leader and writes its answer.
func (a *API) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeDecodeErr(w, err)
		return
	}
	msg := &nats.Msg{Subject: a.fwd.Subjects.OrchAPI(a.fwd.OrchID), Data: body, Header: nats.Header{
		hdrFwdMethod:    {r.Method},
		hdrFwdPath:      {r.URL.RequestURI()},
		"Authorization": {r.Header.Get("Authorization")},
	}}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	call, err := a.fwd.Requester.Send(msg, a.fwd.Subjects.ForwardReplies())
	if err != nil {
		writeError(w, http.StatusBadGateway, "unavailable", "", "forward to the leading orchestrator: "+err.Error())
		return
	}
	defer call.Close()
	resp, err := call.Next(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		writeUnavailable(w, "no orchestrator of the group leads at the moment; try again")
		return
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "unavailable", "",
			"the leading orchestrator did not answer within "+forwardTimeout.String()+"; the request may have been carried out")
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, "unavailable", "", "forward to the leading orchestrator: "+err.Error())
		return
	}
	if !a.fwd.Signer.Verify(resp) {
		a.authLog.Warn("forward-signature", "answer to a forwarded request refused: bad or missing signature", "subject", resp.Subject)
		writeError(w, http.StatusBadGateway, "unavailable", "", "the answer to the forwarded request failed its signature check")
		return
	}
	status, err := strconv.Atoi(resp.Header.Get(hdrFwdStatus))
	if err != nil || status < 100 || status > 599 {
		writeError(w, http.StatusBadGateway, "unavailable", "", "the leading orchestrator's answer has no status")
		return
	}
	for _, k := range forwardedHeaders {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(resp.Data)
}

// forwardable are the requests a standby may forward, by method and route: the
// routes the API serves through leaderOnly.
var forwardable = map[string]bool{
	"POST /api/v1/tasks":                                   true,
	"POST /api/v1/tasks/{id}/cancel":                       true,
	"GET /api/v1/agents":                                   true,
	"GET /api/v1/work-types":                               true,
	"GET /api/v1/work-types/{agent_type}/{work_type}":      true,
	"GET /api/v1/webhooks/deliveries":                      true,
	"POST /api/v1/batches":                                 true,
	"POST /api/v1/schedules":                               true,
	"POST /api/v1/schedules/{name}/pause":                  true,
	"POST /api/v1/schedules/{name}/resume":                 true,
	"DELETE /api/v1/schedules/{name}":                      true,
	"PUT /api/v1/workflows/{name}":                         true,
	"DELETE /api/v1/workflows/{name}":                      true,
	"POST /api/v1/workflows/{name}/runs":                   true,
	"POST /api/v1/workflow-runs/{id}/cancel":               true,
	"POST /api/v1/workflow-runs/{id}/steps/{step}/approve": true,
	"POST /api/v1/workflow-runs/{id}/steps/{step}/reject":  true,
}

// AnswerForwarded serves msg, a request a standby forwarded, and publishes the
// signed answer to its reply subject. It blocks while the request is served (a
// submit waits for its commit): the caller runs it off the subscription's
// goroutine, once it has checked that the reply subject is a forwarding inbox.
func (a *API) AnswerForwarded(msg *nats.Msg) {
	rw := &bufferedResponse{header: http.Header{}}
	a.serveForwarded(rw, msg)
	out := &nats.Msg{Subject: msg.Reply, Data: rw.body.Bytes(), Header: nats.Header{hdrFwdStatus: {strconv.Itoa(rw.status)}}}
	for _, k := range forwardedHeaders {
		if v := rw.header.Get(k); v != "" {
			out.Header.Set(k, v)
		}
	}
	a.fwd.Signer.Sign(out)
	if err := a.fwd.Conn.PublishMsg(out); err != nil {
		a.log.Warn("answer a forwarded request", "err", err)
	}
}

func (a *API) serveForwarded(w *bufferedResponse, msg *nats.Msg) {
	if !a.serving() { // the lead moved on: never forward again
		writeUnavailable(w, "no orchestrator of the group leads at the moment; try again")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, msg.Header.Get(hdrFwdMethod), msg.Header.Get(hdrFwdPath), bytes.NewReader(msg.Data))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_field", "", "forwarded request: "+err.Error())
		return
	}
	req.Header.Set("Authorization", msg.Header.Get("Authorization"))
	if _, pattern := a.mux.Handler(req); !forwardable[pattern] {
		writeError(w, http.StatusBadRequest, "invalid_field", "", "this request is not forwarded to the leader")
		return
	}
	a.mux.ServeHTTP(w, req)
}

// bufferedResponse is an http.ResponseWriter that keeps the answer.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
