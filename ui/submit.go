package ui

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/envelope"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/worktype"
)

// submitForm is the submit form's values, kept when it is shown again.
type submitForm struct {
	Target, JSON, MaxDuration, MaxMemory, GPUMemory, Pin string
	// Params are the parameter inputs' values, by parameter name; Posted says
	// they were posted (else the inputs show the schema's defaults).
	Params url.Values
	Posted bool
}

// submitProblem is why a submission was refused: Message for the whole form,
// Fields for the parameters' inputs, by parameter name.
type submitProblem struct {
	Message string
	Fields  map[string]string
}

func (u *UI) submitPage(w http.ResponseWriter, r *http.Request, sess *session) {
	u.showSubmit(w, r, sess, http.StatusOK, submitForm{Target: r.URL.Query().Get("target")}, submitProblem{})
}

// showSubmit renders the submit form: the work types to choose from, and the
// inputs of the chosen one's parameters.
func (u *UI) showSubmit(w http.ResponseWriter, r *http.Request, sess *session, status int, f submitForm, p submitProblem) {
	if !sess.operator() {
		u.fail(w, r, sess, http.StatusForbidden, "Your token's role ("+sess.role+") may not submit tasks.")
		return
	}
	wts, err := u.workTypes(r.Context(), sess)
	if err != nil && p.Message == "" {
		p.Message = "The work types could not be listed: " + err.Error()
	}
	data := map[string]any{"Offers": offers(wts), "Form": f, "Problem": p.Message}
	for _, wt := range wts {
		if target(wt) == f.Target {
			data["Chosen"] = wt
			data["Inputs"] = paramInputs(wt.Parameters, f.Params, f.Posted, p.Fields)
		}
	}
	u.render(w, status, "submit", sess, data)
}

// submit submits the form's task, or with action=choose (the form's button
// for a browser without JavaScript) shows the chosen work type's inputs.
func (u *UI) submit(w http.ResponseWriter, r *http.Request, sess *session) {
	f := submitForm{Target: r.PostFormValue("target"), JSON: strings.TrimSpace(r.PostFormValue("params_json")),
		MaxDuration: strings.TrimSpace(r.PostFormValue("max_duration_seconds")), MaxMemory: strings.TrimSpace(r.PostFormValue("max_memory_mb")),
		GPUMemory: strings.TrimSpace(r.PostFormValue("gpu_vram_mb")), Pin: strings.TrimSpace(r.PostFormValue("agent_id")),
		Params: postedParams(r.PostForm), Posted: true}
	if r.PostFormValue("action") == "choose" {
		f.Params, f.Posted = nil, false
		u.showSubmit(w, r, sess, http.StatusOK, f, submitProblem{})
		return
	}
	req, fieldErrs, err := f.request(u.paramFields(r, sess, f.Target))
	if p, bad := formProblem(fieldErrs, err); bad {
		u.showSubmit(w, r, sess, http.StatusBadRequest, f, p)
		return
	}
	var created task.Task
	if err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/tasks", req, &created); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusUnprocessableEntity) {
			u.showSubmit(w, r, sess, ae.status, f, refusal(ae))
			return
		}
		u.failAPI(w, r, sess, err)
		return
	}
	http.Redirect(w, r, u.path+"tasks/"+url.PathEscape(created.ID), http.StatusSeeOther)
}

// paramFields are the parameters of target ("agent type/work type") as its
// schema declares them; none when the catalogue has no schema for it.
func (u *UI) paramFields(r *http.Request, sess *session, target string) []worktype.Field {
	typ, name, ok := strings.Cut(target, "/")
	if !ok {
		return nil
	}
	wt := u.workType(r.Context(), sess, typ, name)
	if wt == nil {
		return nil
	}
	return worktype.Fields(wt.Parameters)
}

// formProblem is what the form says when building its request failed (err) or
// some inputs did not convert (fieldErrs); bad is false when neither.
func formProblem(fieldErrs map[string]string, err error) (p submitProblem, bad bool) {
	if err == nil && len(fieldErrs) == 0 {
		return p, false
	}
	p = submitProblem{Message: "Some parameters are not what their work type takes: see below.", Fields: fieldErrs}
	if err != nil {
		p.Message = err.Error()
	}
	return p, true
}

// refusal is the API's refusal of a submission as the form shows it: its
// field, pointer and message on top, and the message beside the input of the
// parameter its pointer names.
func refusal(ae *apiError) submitProblem {
	p := submitProblem{Message: ae.message}
	if ae.field != "" {
		p.Message = ae.field + ": " + ae.message
	}
	if ae.pointer != "" {
		p.Message = ae.field + " " + ae.pointer + ": " + ae.message
		if ae.field == "parameters" {
			name, _, _ := strings.Cut(strings.TrimPrefix(ae.pointer, "/"), "/")
			name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
			p.Fields = map[string]string{name: ae.message}
		}
	}
	return p
}

// request builds the task the form asks for: parameters from the inputs of
// fields, converted to their types, then those of the JSON object, if given,
// over them. fieldErrs are the inputs' values that do not convert, by
// parameter name.
func (f submitForm) request(fields []worktype.Field) (req api.SubmitRequest, fieldErrs map[string]string, err error) {
	typ, workType, ok := strings.Cut(f.Target, "/")
	if !ok || typ == "" || workType == "" {
		return req, nil, fmt.Errorf("choose an agent type and a work type")
	}
	req = api.SubmitRequest{ToAgent: envelope.AgentType(typ), WorkType: workType}
	req.Parameters, fieldErrs = formParams(fields, f.Params)
	if f.JSON != "" {
		var given map[string]any
		if err := json.Unmarshal([]byte(f.JSON), &given); err != nil || given == nil {
			return req, fieldErrs, fmt.Errorf("parameters (JSON): must be one JSON object: %v", cmp.Or(err, errors.New("got null")))
		}
		for k, v := range given {
			req.Parameters[k] = v
			delete(fieldErrs, k)
		}
	}
	var hints task.Hints
	var gpu int64
	for _, h := range []struct {
		name, value string
		to          *int64
	}{{"max duration", f.MaxDuration, &hints.MaxDurationSeconds}, {"memory", f.MaxMemory, &hints.MaxMemoryMB},
		{"GPU memory", f.GPUMemory, &gpu}} {
		if h.value == "" {
			continue
		}
		n, err := strconv.ParseInt(h.value, 10, 64)
		if err != nil || n < 1 {
			return req, fieldErrs, fmt.Errorf("%s: must be a whole number above 0", h.name)
		}
		*h.to = n
	}
	hints.AgentID = f.Pin
	if gpu > 0 {
		hints.GPUVRAMMB = &gpu
	}
	if hints != (task.Hints{}) {
		req.Hints = &hints
	}
	return req, fieldErrs, nil
}
