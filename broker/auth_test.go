package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/errcodes"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
)

func TestAuthenticatorSaysWhyAndNeverHoldsTheToken(t *testing.T) {
	auth := broker.Authenticator{Want: func(id string) (string, bool) {
		if id == "code-1" {
			return "secret-code-1", true
		}
		return "", false
	}}
	msg := func(token, id string) *nats.Msg {
		m := &nats.Msg{Subject: "x"}
		if token != "" {
			broker.SetAuth(m, token, id)
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		msg    *nats.Msg
		status string // "" accepted
	}{
		{"right token", msg("secret-code-1", "code-1"), ""},
		{"no token", msg("", ""), errcodes.TokenMissing},
		{"unknown agent", msg("secret-code-1", "code-9"), errcodes.TokenUnknown},
		{"wrong token", msg("secret-code-2", "code-1"), errcodes.TokenInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, e := auth.Check(tc.msg)
			if tc.status == "" {
				if e != nil || id != "code-1" {
					t.Fatalf("got %q %v, want code-1 accepted", id, e)
				}
				return
			}
			if e == nil || e.Code != errcodes.AuthenticationFailed || e.Context[errcodes.KeyTokenStatus] != tc.status {
				t.Fatalf("got %v, want 5004 %s", e, tc.status)
			}
			if strings.Contains(e.Error(), "secret") || strings.Contains(e.Message, "secret") {
				t.Fatalf("refusal holds a token: %v", e)
			}
		})
	}
}

func TestRefuseAnswersWithoutCredentials(t *testing.T) {
	srv := testnats.Start(t, broker.ServerConfig{})
	nc := testnats.Connect(t, srv)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	e := errcodes.NewAuthenticationFailed("code-1", errcodes.TokenInvalid)
	if err := broker.Refuse(nc, inbox, e, envelope.Code, envelope.Orchestrator); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Header) != 0 {
		t.Fatalf("refusal has headers %v", got.Header)
	}
	env, err := envelope.Decode(got.Data)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := env.Payload.(*envelope.ErrorPayload)
	if !ok || p.Err().Code != errcodes.AuthenticationFailed || env.FromAgent != envelope.Code {
		t.Fatalf("got %s from %s: %+v", env.Type, env.FromAgent, env.Payload)
	}
	if err := broker.Refuse(nc, "", e, envelope.Code, envelope.Orchestrator); err != nil {
		t.Fatalf("no reply subject: %v", err)
	}
}
