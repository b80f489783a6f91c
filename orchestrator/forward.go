package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// A standby forwards the API requests that need the core (a submit, a cancel, the
// agent list, the webhook deliveries, and what makes batches and changes
// schedules) to the leader: one NATS request on OrchAPI, which only the leader
// subscribes to and only orchestrators may use (broker permissions). The request
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
var forwardedHeaders = []string{"Content-Type", "Location", "WWW-Authenticate"}

// leaderOnly serves h when this orchestrator runs the core, and forwards the
// request to the leader otherwise.
func (o *Orchestrator) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if o.serving() {
			h(w, r)
			return
		}
		o.forward(w, r)
	}
}

// forward sends r to the leader and writes its answer.
func (o *Orchestrator) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeDecodeErr(w, err)
		return
	}
	msg := &nats.Msg{Subject: o.subj.OrchAPI(o.id), Data: body, Header: nats.Header{
		hdrFwdMethod:    {r.Method},
		hdrFwdPath:      {r.URL.RequestURI()},
		"Authorization": {r.Header.Get("Authorization")},
	}}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	call, err := o.req.Send(msg, o.subj.ForwardReplies())
	if err != nil {
		writeError(w, http.StatusBadGateway, "unavailable", "", "forward to the leading orchestrator: "+err.Error())
		return
	}
	defer call.Close()
	resp, err := call.Next(ctx)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "", "no orchestrator of the group leads at the moment; try again")
		return
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "unavailable", "",
			"the leading orchestrator did not answer within "+forwardTimeout.String()+"; the request may have been carried out")
		return
	case err != nil:
		writeError(w, http.StatusBadGateway, "unavailable", "", "forward to the leading orchestrator: "+err.Error())
		return
	}
	if !o.fwd.verify(resp) {
		o.authLog.Warn("forward-signature", "answer to a forwarded request refused: bad or missing signature", "subject", resp.Subject)
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
// routes newAPI serves through leaderOnly.
var forwardable = map[string]bool{
	"POST /api/v1/tasks":                   true,
	"POST /api/v1/tasks/{id}/cancel":       true,
	"GET /api/v1/agents":                   true,
	"GET /api/v1/webhooks/deliveries":      true,
	"POST /api/v1/batches":                 true,
	"POST /api/v1/schedules":               true,
	"POST /api/v1/schedules/{name}/pause":  true,
	"POST /api/v1/schedules/{name}/resume": true,
	"DELETE /api/v1/schedules/{name}":      true,
}

// handleForwarded serves a request a standby forwarded, off the subscription's
// goroutine (a submit waits for its commit), and answers it.
func (o *Orchestrator) handleForwarded(msg *nats.Msg) {
	if !broker.InInbox(msg.Reply, o.subj.ForwardReplies()) {
		o.metrics.foreignReplies.Inc()
		o.authLog.Warn("foreign-reply", "forwarded request not served: its reply subject is not a forwarding inbox", "reply", msg.Reply)
		return
	}
	o.subsMu.Lock() // Close waits for o.wg once subsClosed is set
	if o.subsClosed {
		o.subsMu.Unlock()
		return
	}
	o.wg.Add(1)
	o.subsMu.Unlock()
	go func() {
		defer o.wg.Done()
		rw := &bufferedResponse{header: http.Header{}}
		o.serveForwarded(rw, msg)
		out := &nats.Msg{Subject: msg.Reply, Data: rw.body.Bytes(), Header: nats.Header{hdrFwdStatus: {strconv.Itoa(rw.status)}}}
		for _, k := range forwardedHeaders {
			if v := rw.header.Get(k); v != "" {
				out.Header.Set(k, v)
			}
		}
		o.fwd.sign(out)
		if err := o.nc.PublishMsg(out); err != nil {
			o.log.Warn("answer a forwarded request", "err", err)
		}
	}()
}

func (o *Orchestrator) serveForwarded(w *bufferedResponse, msg *nats.Msg) {
	if !o.serving() { // the lead moved on: never forward again
		writeError(w, http.StatusServiceUnavailable, "unavailable", "", "no orchestrator of the group leads at the moment; try again")
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
	if _, pattern := o.mux.Handler(req); !forwardable[pattern] {
		writeError(w, http.StatusBadRequest, "invalid_field", "", "this request is not forwarded to the leader")
		return
	}
	o.handler.ServeHTTP(w, req)
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
