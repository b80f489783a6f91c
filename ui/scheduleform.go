package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/worktype"
)

// The schedule form adds a schedule that makes a task, or edits one. The API
// has no call that changes a schedule: an edit removes it and adds it again
// under the same name (replaceSchedule), and the page says so.

// scheduleForm is the schedule form's values, kept when it is shown again: the
// schedule's own fields, and the task each firing makes as the submit form
// takes it.
type scheduleForm struct {
	submitForm
	Name, Cron, TZ, CatchUp string
	Paused                  bool
	// Editing is set when the form replaces schedule Name.
	Editing bool
}

// catchUps are the choices of the form's catch-up.
var catchUps = []string{string(api.CatchUpNone), string(api.CatchUpLatest), string(api.CatchUpAll)}

func (u *UI) newSchedulePage(w http.ResponseWriter, r *http.Request, sess *session) {
	f := scheduleForm{submitForm: submitForm{Target: r.URL.Query().Get("target")}, CatchUp: string(api.CatchUpNone)}
	u.showScheduleForm(w, r, sess, http.StatusOK, f, submitProblem{})
}

// editSchedulePage shows the form holding schedule name as it is; with
// ?target= (another work type chosen, the script asking for its inputs) the
// inputs of that work type instead, at their defaults.
func (u *UI) editSchedulePage(w http.ResponseWriter, r *http.Request, sess *session) {
	var s api.Schedule
	if err := u.call(r.Context(), sess, http.MethodGet, "/api/v1/schedules/"+url.PathEscape(r.PathValue("name")), nil, &s); err != nil {
		u.failAPI(w, r, sess, err)
		return
	}
	if s.Task == nil {
		u.fail(w, r, sess, http.StatusConflict, "Schedule "+s.Name+" makes a batch: change it with `chiffon schedule`, or remove it and add it again.")
		return
	}
	var fields []worktype.Field
	if wt := u.workType(r.Context(), sess, string(s.Task.ToAgent), s.Task.WorkType); wt != nil {
		fields = worktype.Fields(wt.Parameters)
	}
	f := scheduleFormOf(&s, fields)
	if t := r.URL.Query().Get("target"); t != "" && t != f.Target {
		f.submitForm = submitForm{Target: t}
	}
	u.showScheduleForm(w, r, sess, http.StatusOK, f, submitProblem{})
}

// showScheduleForm renders the schedule form with the inputs of the chosen
// work type's parameters.
func (u *UI) showScheduleForm(w http.ResponseWriter, r *http.Request, sess *session, status int, f scheduleForm, p submitProblem) {
	if !sess.operator() {
		u.fail(w, r, sess, http.StatusForbidden, "Your token's role ("+sess.role+") may not add or change schedules.")
		return
	}
	wts, err := u.workTypes(r.Context(), sess)
	if err != nil && p.Message == "" {
		p.Message = "The work types could not be listed: " + err.Error()
	}
	action := u.path + "schedules/new"
	if f.Editing {
		action = u.path + "schedules/" + url.PathEscape(f.Name) + "/edit"
	}
	data := map[string]any{"Offers": offers(wts), "Form": f, "Problem": p.Message, "Action": action, "CatchUps": catchUps}
	for _, wt := range wts {
		if target(wt) == f.Target {
			data["Chosen"] = wt
			data["Inputs"] = paramInputs(wt.Parameters, f.Params, f.Posted, p.Fields)
		}
	}
	u.render(w, status, "schedule", sess, data)
}

// postedSchedule reads the schedule form as posted; editing, the name is the
// path's, not the form's.
func postedSchedule(r *http.Request, editing string) scheduleForm {
	f := scheduleForm{submitForm: submitForm{Target: r.PostFormValue("target"), JSON: strings.TrimSpace(r.PostFormValue("params_json")),
		MaxDuration: strings.TrimSpace(r.PostFormValue("max_duration_seconds")), MaxMemory: strings.TrimSpace(r.PostFormValue("max_memory_mb")),
		GPUMemory: strings.TrimSpace(r.PostFormValue("gpu_vram_mb")), Pin: strings.TrimSpace(r.PostFormValue("agent_id")),
		Params: postedParams(r.PostForm), Posted: true},
		Name: strings.TrimSpace(r.PostFormValue("name")), Cron: strings.TrimSpace(r.PostFormValue("cron")),
		TZ: strings.TrimSpace(r.PostFormValue("tz")), CatchUp: r.PostFormValue("catch_up"), Paused: r.PostFormValue("paused") == "true"}
	if editing != "" {
		f.Name, f.Editing = editing, true
	}
	return f
}

// spec builds the schedule the form asks for, its task's parameters typed
// from fields; fieldErrs are the parameters' values that do not convert.
func (f scheduleForm) spec(fields []worktype.Field) (api.ScheduleSpec, map[string]string, error) {
	req, fieldErrs, err := f.request(fields)
	spec := api.ScheduleSpec{Name: f.Name, Cron: f.Cron, TZ: f.TZ, CatchUp: api.CatchUp(f.CatchUp), Paused: f.Paused, Task: &req}
	if err != nil || len(fieldErrs) > 0 {
		return spec, fieldErrs, err
	}
	return spec, nil, spec.Validate()
}

// addSchedule adds the form's schedule, or with action=choose shows the chosen
// work type's inputs; it lands on the schedule's row of the list.
func (u *UI) addSchedule(w http.ResponseWriter, r *http.Request, sess *session) {
	u.saveSchedule(w, r, sess, postedSchedule(r, ""))
}

// editSchedule replaces schedule {name} with the form's.
func (u *UI) editSchedule(w http.ResponseWriter, r *http.Request, sess *session) {
	u.saveSchedule(w, r, sess, postedSchedule(r, r.PathValue("name")))
}

// saveSchedule adds the schedule of f, or replaces the one it edits; a
// refusal shows the form again with what was typed.
func (u *UI) saveSchedule(w http.ResponseWriter, r *http.Request, sess *session, f scheduleForm) {
	if r.PostFormValue("action") == "choose" {
		f.Params, f.Posted = nil, false
		u.showScheduleForm(w, r, sess, http.StatusOK, f, submitProblem{})
		return
	}
	spec, fieldErrs, err := f.spec(u.paramFields(r, sess, f.Target))
	if p, bad := formProblem(fieldErrs, err); bad {
		u.showScheduleForm(w, r, sess, http.StatusBadRequest, f, p)
		return
	}
	if f.Editing {
		err = u.replaceSchedule(r, sess, spec)
	} else {
		err = u.call(r.Context(), sess, http.MethodPost, "/api/v1/schedules", spec, nil)
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusConflict || ae.status == http.StatusUnprocessableEntity):
		p := refusal(ae)
		if f.Editing {
			p.Message += " The schedule was put back as it was."
		}
		u.showScheduleForm(w, r, sess, ae.status, f, p)
	case err != nil:
		u.failAPI(w, r, sess, err)
	default:
		http.Redirect(w, r, u.schedulesAt(spec.Name), http.StatusSeeOther)
	}
}

// replaceSchedule removes schedule spec.Name and adds spec under its name.
// When the API refuses spec, it adds the old schedule back, as it was, and
// returns the refusal; when that fails too, an error that says the schedule
// is gone. Between the removal and the addition the schedule does not exist:
// a firing due in that instant is missed.
func (u *UI) replaceSchedule(r *http.Request, sess *session, spec api.ScheduleSpec) error {
	path := "/api/v1/schedules/" + url.PathEscape(spec.Name)
	var old api.Schedule
	if err := u.call(r.Context(), sess, http.MethodGet, path, nil, &old); err != nil {
		return err
	}
	if err := u.call(r.Context(), sess, http.MethodDelete, path, nil, nil); err != nil {
		return err
	}
	err := u.call(r.Context(), sess, http.MethodPost, "/api/v1/schedules", spec, nil)
	if err == nil {
		return nil
	}
	if back := u.call(r.Context(), sess, http.MethodPost, "/api/v1/schedules", old.ScheduleSpec, nil); back != nil {
		return fmt.Errorf("schedule %s was removed to be replaced, the new one was refused (%v), and the old one could not be added back (%v): add it again", spec.Name, err, back)
	}
	return err
}

// scheduleFormOf is the form holding schedule s, which makes a task: the
// parameters that fields have inputs for in them, the others in the JSON box.
func scheduleFormOf(s *api.Schedule, fields []worktype.Field) scheduleForm {
	t := s.Task
	f := scheduleForm{Name: s.Name, Cron: s.Cron, TZ: s.TZ, CatchUp: string(s.CatchUp), Paused: s.Paused, Editing: true,
		submitForm: submitForm{Target: string(t.ToAgent) + "/" + t.WorkType, Params: url.Values{}, Posted: true}}
	rest := map[string]any{}
	for k, v := range t.Parameters {
		rest[k] = v
	}
	for _, fl := range fields {
		if v, ok := rest[fl.Name]; ok && inputKind(fl) != kindJSON {
			f.Params.Set(fl.Name, valueText(v))
			delete(rest, fl.Name)
		}
	}
	if len(rest) > 0 {
		b, _ := json.Marshal(rest)
		f.JSON = string(b)
	}
	if h := t.Hints; h != nil {
		if h.MaxDurationSeconds > 0 {
			f.MaxDuration = strconv.FormatInt(h.MaxDurationSeconds, 10)
		}
		if h.MaxMemoryMB > 0 {
			f.MaxMemory = strconv.FormatInt(h.MaxMemoryMB, 10)
		}
		if n := h.GPUNeed(); n > 0 {
			f.GPUMemory = strconv.FormatInt(n, 10)
		}
		f.Pin = h.AgentID
	}
	return f
}
