package broker

import (
	"errors"

	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/nats-io/nats.go"
)

// Authenticator checks who sent a message, for both daemons: the orchestrator, which
// holds one token per agent, and an agent, which holds the orchestrator's token for
// it. A refusal is a 5004 that says why and never holds a token.
type Authenticator struct {
	// Want returns the token the sender of a message naming agentID (its
	// Chiffon-Agent-Id header) must present, and whether the id is one this daemon
	// knows.
	Want func(agentID string) (token string, known bool)
}

// Check returns the agent id msg names and nil when msg carries the token Want
// gives for it; else that id and a 5004 whose token status is missing, unknown_agent
// or invalid.
func (a Authenticator) Check(msg *nats.Msg) (string, *errcodes.Error) {
	id := AgentIDOf(msg)
	want, known := a.Want(id)
	err := CheckAuth(msg, want)
	switch {
	case errors.Is(err, ErrNoToken):
		return id, errcodes.NewAuthenticationFailed(id, errcodes.TokenMissing)
	case !known:
		return id, errcodes.NewAuthenticationFailed(id, errcodes.TokenUnknown)
	case err != nil:
		return id, errcodes.NewAuthenticationFailed(id, errcodes.TokenInvalid)
	}
	return id, nil
}

// Refuse answers a refused message on reply, the subject its caller found to be
// the sender's own (see InInbox), with e as an error envelope from from to to; ""
// answers nothing. Nobody vouched for the sender, so the answer carries no
// credential: no token header, and fresh ids rather than any the sender chose,
// so that it cannot pass for the daemon's word on a task.
func Refuse(nc *nats.Conn, reply string, e *errcodes.Error, from, to envelope.AgentType) error {
	if reply == "" {
		return nil
	}
	data, err := envelope.Encode(envelope.New(from, to, "", "", envelope.NewErrorPayload(e)))
	if err != nil {
		return err
	}
	return nc.Publish(reply, data)
}
