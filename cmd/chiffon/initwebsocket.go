package main

import (
	"errors"
	"fmt"

	"github.com/chiffon-dev/chiffon/site"
	"github.com/spf13/pflag"
)

// addWebsocketFlags adds `chiffon init`'s flags of a WebSocket listener on the
// broker, for agents beyond the LAN, to fs, setting w.
func addWebsocketFlags(fs *pflag.FlagSet, w *site.Websocket) {
	fs.StringSliceVar(&w.Listen, "websocket", nil, fmt.Sprintf("[HOST:]PORT of a WebSocket listener on the broker for agents beyond the LAN, "+
		"which dial wss://NAME:PORT (suggested: %d; a port alone listens on the host of --broker-listen; with --ha one for every node or one per node)", site.DefaultWebsocketPort))
	fs.StringSliceVar(&w.Hosts, "websocket-host", nil, "with --websocket: the names and IPs agents beyond the LAN dial, added to the broker's (or every node's) certificate")
	fs.BoolVar(&w.NoTLS, "websocket-no-tls", false, "with --websocket on 127.0.0.1: no TLS on the listener, for a reverse proxy on the same host that ends TLS with the broker's certificate")
}

// websocketOptions are the site.Websocket of the flags, or nil without
// --websocket.
func websocketOptions(w site.Websocket, changed func(string) bool) (*site.Websocket, error) {
	if !changed("websocket") {
		if changed("websocket-host") || changed("websocket-no-tls") {
			return nil, errors.New("--websocket-host and --websocket-no-tls need --websocket")
		}
		return nil, nil
	}
	return &w, nil
}
