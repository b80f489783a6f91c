package main

import (
	"fmt"
	"io"
	"path/filepath"
)

// printAddHost is the banner's lines, in operator mode, on how to add a host:
// chiffon enroll here, then the join line it prints on the new host. The
// join needs the API over HTTPS, which up serves beyond loopback only.
func (b upBanner) printAddHost(w io.Writer, dataDir string) {
	if !b.operator {
		return
	}
	fmt.Fprintf(w, "NATS operator mode (the data dir was made so): each daemon connects with its .creds (%s).\n",
		filepath.Join(dataDir, "secrets", "*.creds"))
	fmt.Fprintln(w, "To add a host, make a one-time code here and run the join line it prints on that host:")
	fmt.Fprintf(w, "  chiffon enroll --type code --id <new-agent-id> --data-dir %s\n", dataDir)
	if !b.tls {
		fmt.Fprintln(w, "  (a join needs the API over HTTPS: start up with --host and this host's address first)")
	}
}
