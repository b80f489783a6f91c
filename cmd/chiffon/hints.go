package main

import (
	"crypto/x509"
	"errors"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/client"
)

// What the CLI tells an operator to do next after an error whose fix is in how
// the CLI reaches the API (after a submit that waits for an approval:
// taskview.ApprovalHint).

// httpToHTTPS is how Go's HTTPS server answers a plain HTTP request (400).
const httpToHTTPS = "Client sent an HTTP request to an HTTPS server"

// explainConnection adds to an error of reaching the API what to change: the CA
// to trust for a certificate signed by an unknown authority, https:// for a
// server that speaks HTTPS only.
func explainConnection(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var ae *client.APIError
	switch {
	case errors.As(err, &unknownCA):
		return &explainedError{err: err, msg: err.Error() +
			"\n  the API's certificate is signed by a CA this CLI does not trust: pass the site's CA with --api-ca-file FILE" +
			" (or CHIFFON_API_CA_FILE): secrets/ca.pem of the dir chiffon init wrote, or of the data dir of a `chiffon up`"}
	case errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.Contains(ae.Message, httpToHTTPS):
		return &explainedError{err: err, msg: err.Error() +
			"\n  the API serves HTTPS: use https:// in the server's URL (--server or CHIFFON_SERVER), with --api-ca-file for the site's CA"}
	}
	return err
}
