package orchestrator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
)

// TestAnOrchestratorWithoutEnrollSaysSo: without an enroll section (a site
// of NKey users), each enrollment route, the join included, answers 409
// no_enrollment, naming what is missing.
func TestAnOrchestratorWithoutEnrollSaysSo(t *testing.T) {
	e := newEnv(t)
	c := e.client(e.open())
	ctx := context.Background()
	calls := map[string]func() error{
		"enroll": func() error {
			_, err := c.Enroll(ctx, api.EnrollRequest{AgentID: "pi", Type: "infra"})
			return err
		},
		"list": func() error { _, err := c.Enrollments(ctx); return err },
		"revoke": func() error {
			_, err := c.RevokeAgent(ctx, "pi")
			return err
		},
		"join": func() error {
			resp, err := c.HTTP.Post(c.BaseURL+"/api/v1/join", "application/json",
				strings.NewReader(`{"code":"X","public_key":"UABC"}`))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var body api.ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				return err
			}
			return &client.APIError{Status: resp.StatusCode, APIErrorDetail: body.Error}
		},
	}
	for name, call := range calls {
		var ae *client.APIError
		if err := call(); !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != "no_enrollment" {
			t.Errorf("%s without an enroll section: %v, want 409 no_enrollment", name, err)
		}
	}
}
