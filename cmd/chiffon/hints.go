package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
)

// What the CLI tells an operator to do next: after a submit that waits for an
// approval, and after an error whose fix is in how the CLI reaches the API.

// approvalHint is the line that says t waits for an operator's yes and how to give
// it, or "" when it does not wait.
func approvalHint(t *task.Task) string {
	if t.State != task.StateAwaitingApproval {
		return ""
	}
	return waitsForApproval("task", t.ID, t.Approval)
}

// batchApprovalHint is approvalHint for batch b, which asks once for all its
// tasks.
func batchApprovalHint(b *api.Batch) string {
	if b.State != api.BatchAwaitingApproval {
		return ""
	}
	return waitsForApproval("batch", b.ID, b.Approval)
}

// waitsForApproval says that the task or batch id waits for approval a, and
// how to decide.
func waitsForApproval(what, id string, a *task.Approval) string {
	why := "it requires approval"
	if a != nil && a.Why != "" {
		why = a.Why
	}
	return fmt.Sprintf("%s %s is waiting for approval (%s): chiffon approve %s (or chiffon reject %s)", what, id, why, id, id)
}

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
