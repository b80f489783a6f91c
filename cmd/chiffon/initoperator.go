package main

import (
	"fmt"
	"io"

	"github.com/chiffon-dev/chiffon/broker/natsjwt"
	"github.com/chiffon-dev/chiffon/site"
)

// printOperatorNote says, for a site in operator mode (init --operator), what
// its broker configs hold and which keys stay off every host.
func printOperatorNote(w io.Writer, l *site.Layout) {
	if !l.Operator {
		return
	}
	fmt.Fprintln(w, "Operator mode: the broker configs hold the operator's and the accounts' JWTs, not the users;")
	fmt.Fprintf(w, "each daemon connects with its .creds. Keep secrets/%s, %s and %s off every host too.\n",
		natsjwt.OperatorSeed, natsjwt.AccountSeed, natsjwt.SystemAccountSeed)
}
