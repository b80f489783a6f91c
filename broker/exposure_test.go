package broker_test

import (
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/broker"
)

// nonLoopbackIPv4 is an IPv4 address of this machine other than loopback, or
// "" when it has none.
func nonLoopbackIPv4() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestConnectWarnsOfAConnectionOpenToTheNetwork: a daemon that connects to a
// broker beyond loopback without an NKey and without TLS is warned of both at
// connect, and one on loopback of neither.
func TestConnectWarnsOfAConnectionOpenToTheNetwork(t *testing.T) {
	ip := nonLoopbackIPv4()
	if ip == "" {
		t.Skip("this machine has no address beyond loopback")
	}
	s, err := broker.StartServer(broker.ServerConfig{Host: "0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	port := strconv.Itoa(s.Port())
	for _, tc := range []struct {
		host string
		want []string
	}{
		{ip, []string{"without a NATS identity", "has no TLS", "server=" + ip}},
		{"127.0.0.1", nil},
	} {
		t.Run(tc.host, func(t *testing.T) {
			var logs bytes.Buffer
			nc, err := broker.Connect(broker.ConnConfig{URLs: []string{"nats://" + net.JoinHostPort(tc.host, port)},
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			nc.Close()
			for _, w := range tc.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("logs lack %q:\n%s", w, logs.String())
				}
			}
			if tc.want == nil && strings.Contains(logs.String(), "open to the network") {
				t.Errorf("a loopback connection was warned of:\n%s", logs.String())
			}
		})
	}
}
