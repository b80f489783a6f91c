package ui

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// runForm is the form that starts a run of a workflow: an input for each of
// its parameters, typed as it declares them, and a JSON box for the rest.
type runForm struct {
	// JSON is the JSON box's text; Params the inputs' values, by parameter
	// name, and Posted says they were posted (else the defaults show).
	JSON   string
	Params url.Values
	Posted bool
}

// runSchema is a workflow's parameters as the JSON Schema of an object, as
// the submit form's inputs are built from: a parameter of no type is a string.
func runSchema(params map[string]api.WorkflowParam) map[string]any {
	props := make(map[string]any, len(params))
	var required []any
	for name, p := range params {
		prop := map[string]any{"type": cmp.Or(p.Type, "string")}
		if p.Description != "" {
			prop["description"] = p.Description
		}
		if p.Default != nil {
			prop["default"] = p.Default
		}
		props[name] = prop
		if p.Required {
			required = append(required, name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// runFormPage shows the form that starts a run of the path's workflow.
func (u *UI) runFormPage(w http.ResponseWriter, r *http.Request, sess *session) {
	u.showRunForm(w, r, sess, http.StatusOK, runForm{}, submitProblem{})
}

// showRunForm renders the run form, with what was typed and why it was
// refused.
func (u *UI) showRunForm(w http.ResponseWriter, r *http.Request, sess *session, status int, f runForm, p submitProblem) {
	if !sess.operator() {
		u.fail(w, r, sess, http.StatusForbidden, "Your token's role ("+sess.role+") may not start runs.")
		return
	}
	var wf api.Workflow
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflows/"+url.PathEscape(r.PathValue("name")), nil, &wf); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	u.render(w, status, "runform", sess, map[string]any{"Workflow": &wf, "Form": f, "Problem": p.Message,
		"Inputs": paramInputs(runSchema(wf.Params), f.Params, f.Posted, p.Fields)})
}

// startRun starts a run of the path's workflow with the form's parameters and
// goes to its page; a refusal, the dashboard's or the API's, shows the form
// again with it beside the input at fault.
func (u *UI) startRun(w http.ResponseWriter, r *http.Request, sess *session) {
	name := r.PathValue("name")
	f := runForm{JSON: strings.TrimSpace(r.PostFormValue("params_json")), Params: postedParams(r.PostForm), Posted: true}
	var wf api.Workflow
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/workflows/"+url.PathEscape(name), nil, &wf); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	req, fieldErrs, err := f.request(worktype.Fields(runSchema(wf.Params)))
	if err != nil || len(fieldErrs) > 0 {
		p := submitProblem{Message: "Some parameters are not what the workflow takes: see below.", Fields: fieldErrs}
		if err != nil {
			p.Message = err.Error()
		}
		u.showRunForm(w, r, sess, http.StatusBadRequest, f, p)
		return
	}
	var run api.WorkflowRun
	if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/workflows/"+url.PathEscape(name)+"/runs", req, &run); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusUnprocessableEntity) {
			u.showRunForm(w, r, sess, ae.status, f, runRefusal(ae))
			return
		}
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"workflow-runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
}

// request is the run the form asks for: the inputs' values converted to the
// types of fields, then the JSON box's over them.
func (f runForm) request(fields []worktype.Field) (req api.WorkflowRunRequest, fieldErrs map[string]string, err error) {
	req.Params, fieldErrs = formParams(fields, f.Params)
	if f.JSON != "" {
		var given map[string]any
		if err := json.Unmarshal([]byte(f.JSON), &given); err != nil || given == nil {
			return req, fieldErrs, fmt.Errorf("parameters (JSON): must be one JSON object: %v", cmp.Or(err, errors.New("got null")))
		}
		for k, v := range given {
			req.Params[k] = v
			delete(fieldErrs, k)
		}
	}
	return req, fieldErrs, nil
}

// runRefusal is the API's refusal of a run as the form shows it: on top, and
// beside the input of the parameter it names, as field "params.NAME" (or
// "params" and the pointer "/NAME").
func runRefusal(ae *apiError) submitProblem {
	p := refusal(ae)
	name, ok := strings.CutPrefix(ae.field, "params.")
	if !ok && ae.field == "params" && ae.pointer != "" {
		name, _, _ = strings.Cut(strings.TrimPrefix(ae.pointer, "/"), "/")
		name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	}
	if name != "" {
		p.Fields = map[string]string{name: ae.message}
	}
	return p
}
