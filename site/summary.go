package site

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"

	"github.com/chiffon-dev/chiffon/broker/natsjwt"
)

// apiAddr is the address clients reach the API of l by: its listen address, or
// for a wildcard one (every address) the first name in the API's certificate,
// else 127.0.0.1.
func (l *Layout) apiAddr() string {
	host, port, err := net.SplitHostPort(l.Listen)
	if err != nil || !IsWildcard(host) {
		return l.Listen
	}
	host = "127.0.0.1"
	if len(l.Spec.APIHosts) > 0 {
		host = l.Spec.APIHosts[0]
	}
	return net.JoinHostPort(host, port)
}

// WriteSummary says what chiffon init wrote, which files each host needs and
// how to start the site.
func (l *Layout) WriteSummary(w io.Writer, st *Secrets) {
	fmt.Fprintf(w, "Wrote %s:\n", l.Dir)
	if l.Nodes == nil {
		users := "NKey users"
		if l.Operator {
			users = "operator mode"
		}
		fmt.Fprintf(w, "  broker.conf             the broker (%s): %s, TLS, least privilege\n", l.BrokerListen, users)
	}
	for _, n := range l.Nodes {
		fmt.Fprintf(w, "  %-23s node %s of the cluster, on %s (clients %s, routes %s over verified TLS), JetStream\n",
			n.Name+".conf", strings.TrimPrefix(n.Name, "broker-"), n.Hosts[0], n.ClientListen, n.RouteListen)
	}
	scheme, ca := "http", ""
	if l.Spec.APIHosts != nil {
		scheme, ca = "https", fmt.Sprintf("; clients trust it with --api-ca-file %s", filepath.Join(l.Dir, "secrets", CA))
	}
	for _, orch := range l.Orchestrators {
		if orch.Advertise == "" {
			fmt.Fprintf(w, "  %-23s orchestrator (API %s://%s%s)\n", orch.File, scheme, l.apiAddr(), ca)
			continue
		}
		fmt.Fprintf(w, "  %-23s member of group %s, tasks in JetStream on 3 replicas (API %s, listening on %s%s)\n",
			orch.File, l.HA.Group, orch.Advertise, l.Listen, ca)
	}
	for _, a := range l.Agents {
		fmt.Fprintf(w, "  agents/%-16s %s agent\n", a.ID+".yaml", a.Type)
	}
	for _, c := range l.Clients {
		fmt.Fprintf(w, "  clients/%-15s client %s\n", c.Name+".txt", c.Name)
	}
	l.writeWebsocketSummary(w)
	fmt.Fprintf(w, "Copy to each host's %s only the files it needs (all 0600 but the certificates):\n", l.SecretsDir)
	for _, h := range st.HostFiles() {
		fmt.Fprintf(w, "  %-22s %s\n", h.Host+":", strings.Join(h.Files, ", "))
	}
	fmt.Fprintln(w, "Keep secrets/ca-key.pem off every host: it signs certificates.")
	l.writeOperatorNote(w)
	if len(st.Imported) > 0 {
		fmt.Fprintln(w, "From the first release's site (see docs/upgrading.md):")
		for _, line := range st.Imported {
			fmt.Fprintf(w, "  %s\n", line)
		}
		fmt.Fprintf(w, "  %s/ is no longer read: delete it once every host has its new files\n", LegacyTokensDir)
	}
	if l.HA != nil {
		fmt.Fprintln(w, "Then run chiffon broker --config broker-N.conf on each node's host, and once the three have")
		fmt.Fprintln(w, "started, chiffon orchestrator --config orchestrator-N.yaml on each orchestrator's host;")
	} else {
		fmt.Fprintln(w, "Then run: chiffon broker --config broker.conf; chiffon orchestrator --config orchestrator.yaml;")
	}
	fmt.Fprintln(w, "and chiffon agent --config <id>.yaml on each agent host.")
}

// writeWebsocketSummary says where the broker, or each node, listens for
// WebSocket clients and the URL an agent beyond the LAN puts in nats.urls.
func (l *Layout) writeWebsocketSummary(w io.Writer) {
	if l.Websocket == nil {
		return
	}
	_, port, _ := net.SplitHostPort(l.WebsocketListens[0])
	host := "NAME"
	if len(l.Websocket.Hosts) > 0 {
		host = l.Websocket.Hosts[0]
	}
	fmt.Fprintf(w, "WebSocket for agents beyond the LAN, whose nats.urls is [wss://%s] (or a proxy's port):\n",
		net.JoinHostPort(host, port))
	tls := "TLS with the broker's certificate"
	if l.Websocket.NoTLS {
		tls = "no TLS: a proxy on this host must end it, with the broker's certificate"
	}
	for i, addr := range l.WebsocketListens {
		name := "broker.conf"
		if l.Nodes != nil {
			name = l.Nodes[i].Name + ".conf"
		}
		fmt.Fprintf(w, "  %-23s on %s, %s\n", name, addr, tls)
	}
}

// writeOperatorNote says, for a site in operator mode (init --operator), what
// its broker configs hold and which keys stay off every host.
func (l *Layout) writeOperatorNote(w io.Writer) {
	if !l.Operator {
		return
	}
	fmt.Fprintln(w, "Operator mode: the broker configs hold the operator's and the accounts' JWTs, not the users;")
	fmt.Fprintf(w, "each daemon connects with its .creds. Keep secrets/%s, %s and %s off every host too.\n",
		natsjwt.OperatorSeed, natsjwt.AccountSeed, natsjwt.SystemAccountSeed)
	fmt.Fprintln(w, "A new host joins with a one-time code: chiffon enroll --type T --id ID, then chiffon agent join")
	fmt.Fprintln(w, "on that host; chiffon agent revoke ID retires one (docs/operations.md, adding and retiring a host).")
}
