package main

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/chiffon-dev/chiffon/client"
)

// explainedError is an API error said in the CLI's words; --json still reports
// the API's code and status (errjson.go finds the API error inside).
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

// status is the HTTP status of the API's answer err, or 0.
func status(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// notFound says a 404 as msg.
func notFound(err error, msg string) error {
	if status(err) == http.StatusNotFound {
		return &explainedError{msg: msg + " (HTTP 404)", err: err}
	}
	return err
}

// noBatch says a 404 as no batch id.
func noBatch(err error, id string) error { return notFound(err, fmt.Sprintf("no batch %s", id)) }

// noSchedule says a 404 as no schedule of that name.
func noSchedule(err error, name string) error {
	return notFound(err, fmt.Sprintf("no schedule named %q", name))
}
