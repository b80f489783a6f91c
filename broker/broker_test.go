package broker_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/internal/testnats"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSubjectsUseOnePrefix(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{broker.Subjects{}.AgentWork("a-1"), "chiffon.agent.a-1.work"},
		{broker.Subjects{}.AgentControl("a-1"), "chiffon.agent.a-1.control"},
		{broker.Subjects{}.OrchTask("o", "t"), "chiffon.orch.o.task.t"},
		{broker.Subjects{}.OrchTasks("o"), "chiffon.orch.o.task.*"},
		{broker.Subjects{Prefix: "lab"}.Register(), "lab.registry.register"},
		{broker.Subjects{}.Heartbeat(), "chiffon.registry.heartbeat"},
		{broker.Subjects{}.Discover(), "chiffon.registry.discover"},
		{broker.TaskIDFromSubject("chiffon.orch.o.task.t-9"), "t-9"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestTokensAreRandomAlphanumeric(t *testing.T) {
	a, b := broker.NewToken(), broker.NewToken()
	if len(a) != broker.TokenLen || a == b {
		t.Fatalf("tokens %q %q", a, b)
	}
	if strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Fatalf("token %q has other characters", a)
	}
}

func TestTokenFileRoundTripIsPrivateAndErrorsHideTheToken(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tok")
	tok := broker.NewToken()
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := broker.WriteTokenFile(p, tok); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	if got, err := broker.ReadTokenFile(p); err != nil || got != tok {
		t.Fatalf("read %q %v", got, err)
	}
	_ = os.WriteFile(p, []byte(" \n"), 0o600)
	if _, err := broker.ReadTokenFile(p); err == nil || strings.Contains(err.Error(), tok) {
		t.Fatalf("empty file: %v", err)
	}
}

func TestCheckAuth(t *testing.T) {
	tok := broker.NewToken()
	msg := &nats.Msg{}
	if err := broker.CheckAuth(msg, tok); !errors.Is(err, broker.ErrNoToken) {
		t.Fatalf("no header: %v", err)
	}
	other := broker.NewToken()
	broker.SetAuth(msg, other, "a-1")
	if err := broker.CheckAuth(msg, tok); !errors.Is(err, broker.ErrBadToken) || strings.Contains(err.Error(), other) {
		t.Fatalf("bad token: %v", err)
	}
	broker.SetAuth(msg, tok, "a-1")
	if err := broker.CheckAuth(msg, tok); err != nil || broker.AgentIDOf(msg) != "a-1" {
		t.Fatalf("good token: %v %q", err, broker.AgentIDOf(msg))
	}
	if err := broker.CheckAuth(msg, ""); !errors.Is(err, broker.ErrBadToken) {
		t.Fatalf("empty expected token must not match: %v", err)
	}
}

// TestSharedAuthHeader sends several messages with one AuthHeader through a real
// server: each arrives with the token and agent id, and the header is unchanged.
func TestSharedAuthHeader(t *testing.T) {
	nc := testnats.Connect(t, testnats.Start(t, broker.ServerConfig{}))
	sub, err := nc.SubscribeSync("auth.test")
	if err != nil {
		t.Fatal(err)
	}
	tok := broker.NewToken()
	hdr := broker.AuthHeader(tok, "a-1")
	for i := range 3 {
		if err := nc.PublishMsg(&nats.Msg{Subject: "auth.test", Data: []byte{byte(i)}, Header: hdr}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		msg, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := broker.CheckAuth(msg, tok); err != nil || broker.AgentIDOf(msg) != "a-1" {
			t.Fatalf("received %v: %v %q", msg.Header, err, broker.AgentIDOf(msg))
		}
	}
	var want nats.Msg
	broker.SetAuth(&want, tok, "a-1")
	if !reflect.DeepEqual(hdr, want.Header) {
		t.Fatalf("AuthHeader %v, SetAuth sets %v", hdr, want.Header)
	}
}

func TestServerRequiresStoreDirForJetStream(t *testing.T) {
	if _, err := broker.StartServer(broker.ServerConfig{JetStream: true}); err == nil {
		t.Fatal("JetStream without a store dir started")
	}
	s, err := broker.StartServer(broker.ServerConfig{JetStream: true, StoreDir: t.TempDir(), MaxPayload: 512 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if s.MaxPayload() != 512<<10 || s.Port() == 0 {
		t.Fatalf("max payload %d, port %d", s.MaxPayload(), s.Port())
	}
}

func TestConnectReconnectsAfterServerRestart(t *testing.T) {
	s, err := broker.StartServer(broker.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	port := s.Port()
	reconnected := make(chan struct{}, 1)
	nc, err := broker.Connect(broker.ConnConfig{URLs: []string{s.ClientURL()}, Name: "t",
		OnReconnect: func(*nats.Conn) { reconnected <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("x")
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s, err = broker.StartServer(broker.ServerConfig{Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect")
	}
	if err := nc.Publish("x", []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(10 * time.Second); err != nil || string(m.Data) != "hi" {
		t.Fatalf("after reconnect: %v", err)
	}
}

func TestConnectNeedsAURL(t *testing.T) {
	if _, err := broker.Connect(broker.ConnConfig{}); err == nil {
		t.Fatal("no error without URLs")
	}
}
