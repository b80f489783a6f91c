package broker

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestRefusalNamesTheIdentityWhenAWebsocketCloses: over WebSocket a server that
// refuses the identity may close before nats.go has written its PING, so the
// refusal comes as a broken pipe or an EOF; Connect then names the identity
// rather than waiting on. Over nats:// the same close stays a TLS failure.
func TestRefusalNamesTheIdentityWhenAWebsocketCloses(t *testing.T) {
	closed := []error{
		fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, syscall.EPIPE),
		fmt.Errorf("write tcp: %w", syscall.ECONNRESET),
		io.EOF,
	}
	for _, err := range closed {
		for _, u := range []string{"wss://gate.example.org:8443", "ws://127.0.0.1:8443"} {
			got := refusal(ConnConfig{URLs: []string{u}, NKeyFile: "/s/agent-a.nk"}, err)
			if !strings.Contains(got, "identity in nkey_file /s/agent-a.nk") || !strings.Contains(got, "client certificate") {
				t.Errorf("%s, %v: %q", u, err, got)
			}
		}
		if got := refusal(ConnConfig{URLs: []string{"wss://gate.example.org"}}, err); !strings.Contains(got, "no identity") {
			t.Errorf("no identity, %v: %q", err, got)
		}
	}
	if got := refusal(ConnConfig{URLs: []string{"tls://nas.lan:4222"}, NKeyFile: "/s/a.nk"}, closed[0]); strings.Contains(got, "WebSocket") {
		t.Errorf("nats:// close: %q", got)
	}
	if got := refusal(ConnConfig{URLs: []string{"wss://gate.example.org"}}, syscall.ECONNREFUSED); got != "" {
		t.Errorf("a refused dial is worth waiting for: %q", got)
	}
}
