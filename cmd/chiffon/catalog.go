package main

import (
	"context"
	"net/http"

	"github.com/chiffon-dev/chiffon/api"
	"github.com/chiffon-dev/chiffon/client"
)

// fetchWorkTypes is the orchestrator's catalogue of work types; served is false,
// without error, when it serves none (an orchestrator older than the
// catalogue answers 404).
func fetchWorkTypes(ctx context.Context, c *client.Client) (list []api.WorkType, served bool, err error) {
	list, err = c.WorkTypes(ctx)
	if status(err) == http.StatusNotFound {
		return nil, false, nil
	}
	return list, err == nil, err
}

// findWorkType is work type name of agent type to in list, or nil.
func findWorkType(list []api.WorkType, to, name string) *api.WorkType {
	for i := range list {
		if string(list[i].AgentType) == to && list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
