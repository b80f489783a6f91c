package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
	"github.com/chiffon-dev/chiffon/worktype"
	"github.com/spf13/cobra"
)

// errorJSON is how a command run with --json reports its error on stderr: the API's
// error body (api.ErrorBody) with the HTTP status of an API answer and the
// process's exit code beside.
type errorJSON struct {
	Error errorJSONDetail `json:"error"`
}

type errorJSONDetail struct {
	api.APIErrorDetail
	// HTTPStatus is the API's answer, when the error is one.
	HTTPStatus int `json:"http_status,omitempty"`
	// ExitCode is the process's exit code (see exitcodes.go).
	ExitCode int `json:"exit_code"`
}

// Codes of the errors the CLI finds itself; an API error keeps the API's code.
const (
	errCodeUsage       = "usage"       // a bad flag or argument: exit 2
	errCodeUnreachable = "unreachable" // no server answered at the address
	errCodeNotFinished = "not_finished"
	errCodeCLI         = "error" // anything else
)

// wantsJSON reports whether the command that ran asked for JSON. A flag error may stop
// parsing before --json is read, so the arguments are looked at too.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	if f == nil {
		return false
	}
	return f.Value.String() == "true" || slices.Contains(args, "--json") || slices.Contains(args, "--json=true")
}

// writeErrorJSON writes err as one JSON line.
func writeErrorJSON(w io.Writer, err error, exit int) {
	d := errorJSONDetail{APIErrorDetail: api.APIErrorDetail{Code: errCodeCLI, Message: err.Error()}, ExitCode: exit}
	var (
		apiErr   *client.APIError
		unr      *unreachableError
		paramErr *worktype.ParamError
	)
	switch {
	case errors.As(err, &apiErr):
		d.APIErrorDetail, d.HTTPStatus = apiErr.APIErrorDetail, apiErr.Status
		if d.Code == "" {
			d.Code = fmt.Sprintf("http_%d", apiErr.Status)
		}
	case errors.As(err, &paramErr):
		// Found by the CLI, said as the orchestrator would say it.
		d.Code, d.Field, d.Pointer, d.Message = codeInvalidParameter, "parameters", paramErr.Pointer, paramErr.Message
	case errors.As(err, &unr):
		d.Code = errCodeUnreachable
	case exit == 2:
		d.Code = errCodeUsage
	case exit == exitNotFinished:
		d.Code = errCodeNotFinished
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(errorJSON{Error: d})
}
