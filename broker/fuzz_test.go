package broker_test

import (
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// FuzzCheckAuth checks the bearer-token check every daemon runs on every message's
// headers: it never panics and accepts exactly "Bearer <the token>".
func FuzzCheckAuth(f *testing.F) {
	const token = "0123456789abcdefghijklmnopqrstuv"
	for _, s := range []string{"Bearer " + token, "Bearer ", "bearer " + token, token, "Bearer " + token + " ", ""} {
		f.Add(s, "code-1")
	}
	f.Fuzz(func(t *testing.T, header, agentID string) {
		msg := &nats.Msg{Subject: "x", Header: nats.Header{}}
		msg.Header.Set(broker.HeaderAuthorization, header)
		msg.Header.Set(broker.HeaderAgentID, agentID)
		err := broker.CheckAuth(msg, token)
		if (err == nil) != (header == "Bearer "+token) {
			t.Fatalf("CheckAuth(%q) = %v", header, err)
		}
		if broker.CheckAuth(msg, "") == nil {
			t.Fatalf("CheckAuth(%q) with no expected token accepted it", header)
		}
		_ = broker.AgentIDOf(msg)
	})
}
