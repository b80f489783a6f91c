package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// WebsocketFile is the websocket block of a broker's config file: a second client
// listener that speaks NATS inside WebSocket, for daemons beyond the LAN (nats.go
// dials wss:// URLs). Its clients are the file's users, with the same NKeys and
// allow lists as on the client port: the block sets no authentication of its own,
// so nats-server applies the file's authorization to it.
type WebsocketFile struct {
	// Listen is the address, "host:port".
	Listen string
	// TLS is the listener's certificate and key, and with Verify the CA that
	// client certificates must chain to; required unless NoTLS.
	TLS *ServerTLS
	// NoTLS serves WebSocket without TLS, for a reverse proxy on the same host that
	// ends TLS in front of it: only on a loopback Listen.
	NoTLS bool
	// Compression lets clients that ask for it compress their frames.
	Compression bool
	// HandshakeTimeout bounds a client's TLS handshake and WebSocket upgrade
	// together; 0 means 10 s. (nats-server's own default is no bound at all.)
	HandshakeTimeout time.Duration
}

// defaultWebsocketHandshake is WebsocketFile.HandshakeTimeout's default: a
// round trip or two across the internet, with room for a slow host.
const defaultWebsocketHandshake = 10 * time.Second

// render writes w's block. same_origin refuses a browser page of another site,
// which would send its own Origin; NATS clients outside a browser send no Origin
// and are not checked.
func (w *WebsocketFile) render(b *strings.Builder) {
	timeout := w.HandshakeTimeout
	if timeout == 0 {
		timeout = defaultWebsocketHandshake
	}
	b.WriteString("\n# NATS over WebSocket, for daemons beyond the LAN: the same users and allow lists.\n")
	fmt.Fprintf(b, "websocket {\n  listen: %s\n  same_origin: true\n  compression: %t\n  handshake_timeout: %s\n",
		quote(w.Listen), w.Compression, quote(timeout.String()))
	if w.NoTLS {
		b.WriteString("  # TLS ends at a proxy on this host.\n  no_tls: true\n")
	}
	if t := w.TLS; t != nil {
		fmt.Fprintf(b, "  tls {\n    cert_file: %s\n    key_file: %s\n", quote(t.CertFile), quote(t.KeyFile))
		if t.CAFile != "" {
			fmt.Fprintf(b, "    ca_file: %s\n", quote(t.CAFile))
		}
		fmt.Fprintf(b, "    verify: %t\n  }\n", t.Verify)
	}
	b.WriteString("}\n")
}

// check refuses a block nats-server would reject, and plain WebSocket beyond
// loopback, where every message, tokens included, would cross the network in the
// clear.
func (w *WebsocketFile) check() []error {
	var errs []error
	host, _, err := net.SplitHostPort(w.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("websocket listen %q: %v", w.Listen, err))
	}
	switch t := w.TLS; {
	case t == nil && !w.NoTLS:
		errs = append(errs, errors.New("websocket needs TLS (or no_tls on loopback)"))
	case t != nil && w.NoTLS:
		errs = append(errs, errors.New("websocket: TLS and no_tls both set"))
	case t != nil && (t.CertFile == "" || t.KeyFile == ""):
		errs = append(errs, errors.New("websocket TLS needs a cert file and a key file"))
	case t != nil && t.Verify && t.CAFile == "":
		errs = append(errs, errors.New("websocket TLS verify needs a CA file"))
	}
	if w.NoTLS && err == nil && !IsLoopback(host) {
		errs = append(errs, fmt.Errorf("websocket without TLS on %s: only on loopback, behind a proxy on the same host that ends TLS", w.Listen))
	}
	return errs
}

// WebsocketURL is the ws:// or wss:// URL of the server's WebSocket listener, or
// "" when it has none.
func (s *Server) WebsocketURL() string {
	if s.opts.Websocket.Port == 0 {
		return ""
	}
	return s.ns.WebsocketURL()
}

// PlainWebsocketBeyondLoopback reports whether the server's WebSocket listener
// serves without TLS on an address other machines reach.
func (s *Server) PlainWebsocketBeyondLoopback() bool {
	return plainWebsocketBeyondLoopback(s.WebsocketURL())
}

// plainWebsocketBeyondLoopback reports whether raw is a ws:// URL of a host
// beyond loopback.
func plainWebsocketBeyondLoopback(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "ws" && !IsLoopback(u.Hostname())
}

// closedOverWebsocket reports whether err is a server closing a ws:// or wss://
// connection while the client was connecting. nats.go writes CONNECT and PING as two WebSocket
// frames, so a server that refuses the identity after the first may have closed
// the connection before the second is written: the refusal then comes as a
// broken pipe, not as an authorization violation.
func closedOverWebsocket(urls []string, err error) bool {
	if len(urls) == 0 || !(strings.HasPrefix(urls[0], "ws://") || strings.HasPrefix(urls[0], "wss://")) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// websocketClosed says why a server may have closed a WebSocket connection at
// connect: it refused the identity, or wanted a client certificate.
func websocketClosed(cfg ConnConfig) string {
	who := "the connection has no identity (set nkey_file or creds_file)"
	switch {
	case cfg.NKeyFile != "":
		who = "the identity in nkey_file " + cfg.NKeyFile + " is not one it accepts"
	case cfg.CredsFile != "":
		who = "the identity in creds_file " + cfg.CredsFile + " is not one it accepts"
	}
	return "the NATS server closed the WebSocket connection at connect: " + who +
		", or it wants a client certificate (tls.cert_file and tls.key_file)"
}
