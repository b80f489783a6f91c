package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/chiffon-dev/chiffon/site"
)

// upMode settles the NATS mode up runs dataDir's site in: a new data dir
// takes --operator (operator) and records it; an existing one keeps the mode
// it was made in, --operator left out or not. A data dir is never converted:
// --operator given against a dir of NKey users, or --operator=false against
// an operator-mode one, is refused, saying which mode the dir is in.
func upMode(dataDir string, operator, given bool) (bool, error) {
	mode, err := site.ReadDataDirMode(dataDir)
	if err != nil {
		return false, err
	}
	if !mode.Made {
		if operator {
			return true, site.MarkDataDirOperator(dataDir)
		}
		return false, nil
	}
	switch {
	case given && operator && !mode.Operator:
		return false, fmt.Errorf("data dir %s was made with NKey users, not in NATS operator mode, and up never converts a data dir: "+
			"run up without --operator here, or with --operator and a new --data-dir", dataDir)
	case given && !operator && mode.Operator:
		return false, fmt.Errorf("data dir %s was made in NATS operator mode (up --operator), and up never converts a data dir: "+
			"run up without --operator=false here, or give a new --data-dir", dataDir)
	}
	return mode.Operator, nil
}

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
