package httpapi

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestSignerRefusesAnAnswerChangedAfterSigning: an answer verifies as signed,
// and fails once its subject, status, a passed-on header or its body changes, or
// when another group's key checks it.
func TestSignerRefusesAnAnswerChangedAfterSigning(t *testing.T) {
	answer := func() *nats.Msg {
		return &nats.Msg{Subject: "chiffon.fwd.reply.abc", Data: []byte(`{"id":"1"}`),
			Header: nats.Header{hdrFwdStatus: {"201"}, "Location": {"/api/v1/tasks/1"}}}
	}
	s := NewSigner([]byte("operator token"))
	cases := map[string]struct {
		change func(*nats.Msg)
		signer Signer
		want   bool
	}{
		"as signed":       {func(*nats.Msg) {}, s, true},
		"another subject": {func(m *nats.Msg) { m.Subject = "chiffon.fwd.reply.abd" }, s, false},
		"another status":  {func(m *nats.Msg) { m.Header.Set(hdrFwdStatus, "200") }, s, false},
		"another header":  {func(m *nats.Msg) { m.Header.Set("Location", "/api/v1/tasks/2") }, s, false},
		"another body":    {func(m *nats.Msg) { m.Data = []byte(`{"id":"2"}`) }, s, false},
		"another key":     {func(*nats.Msg) {}, NewSigner([]byte("other token")), false},
		"no signature":    {func(m *nats.Msg) { m.Header.Del(hdrFwdSig) }, s, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := answer()
			s.Sign(msg)
			tc.change(msg)
			if got := tc.signer.Verify(msg); got != tc.want {
				t.Errorf("Verify = %v, want %v", got, tc.want)
			}
		})
	}
}
