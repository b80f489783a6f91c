package orchestrator

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/chiffon-dev/chiffon/orchestrator/core"
	"github.com/chiffon-dev/chiffon/orchestrator/task"
	"github.com/chiffon-dev/chiffon/orchestrator/webhook"
)

// WebhookConfig is one receiver of the orchestrator's events.
type WebhookConfig struct {
	// URL is where each delivery is POSTed (http or https).
	URL string `yaml:"url"`
	// Events are the events it gets: task.succeeded, task.failed (failed or
	// ended in error), task.cancelled, or task.finished for all three.
	Events []string `yaml:"events"`
	// SecretFile holds the key of the HMAC-SHA256 signature of each body.
	SecretFile string `yaml:"secret_file"`
	// Secret may be set instead of SecretFile (by tests or an embedding program).
	Secret string `yaml:"-"`
}

func (c WebhookConfig) validate(key string) error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("config: %s.url: must be an http or https URL", key)
	}
	if len(c.Events) == 0 {
		return fmt.Errorf("config: %s.events: name at least one of %v", key, webhook.Events)
	}
	for i, ev := range c.Events {
		if !slices.Contains(webhook.Events, ev) {
			return fmt.Errorf("config: %s.events[%d]: must be one of %v, got %q", key, i, webhook.Events, ev)
		}
	}
	if c.SecretFile == "" && c.Secret == "" {
		return fmt.Errorf("config: %s.secret_file: is required: receivers check the signature with it", key)
	}
	return nil
}

// readWebhooks reads the receivers' secrets.
func (c Config) readWebhooks() ([]webhook.Receiver, error) {
	var out []webhook.Receiver
	for i, w := range c.Webhooks {
		secret := w.Secret
		if secret == "" {
			var err error
			if secret, err = broker.ReadTokenFile(w.SecretFile); err != nil {
				return nil, fmt.Errorf("config: webhooks[%d].secret_file: %w", i, err)
			}
		}
		out = append(out, webhook.Receiver{URL: w.URL, Events: w.Events, Secret: []byte(secret)})
	}
	return out, nil
}

// taskEvent is the webhook event of a task that ended in state s.
func taskEvent(s task.State) string {
	switch s {
	case task.StateSucceeded:
		return webhook.TaskSucceeded
	case task.StateCancelled:
		return webhook.TaskCancelled
	}
	return webhook.TaskFailed // failed, error, rejected
}

// hookReader sends the receivers the events they may want: a task's end and a
// task that waits for approval.
func hookReader(hooks *webhook.Dispatcher) func(core.Event) {
	return func(ev core.Event) {
		switch ev.Kind {
		case core.TaskEnded:
			hooks.Send(taskEvent(ev.Task.State), ev.Task.Clone())
		case core.TaskAwaitsApproval:
			hooks.Send(webhook.ApprovalRequested, ev.Task.Clone())
		}
	}
}

// Deliveries returns the recorded webhook deliveries, newest first.
func (o *Orchestrator) Deliveries() []webhook.Delivery {
	if o.hooks == nil {
		return []webhook.Delivery{}
	}
	return o.hooks.Deliveries()
}

// deliveryRecord is the kind of a kept webhook delivery's record in the task
// store.
const deliveryRecord = "delivery"

// deliveryKeeper keeps the webhook deliveries not taken yet in the task store,
// so that a restart (or a new leader) sends them.
type deliveryKeeper struct{ st task.Store }

// Keep stores k.
func (k deliveryKeeper) Keep(v webhook.Kept) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return k.st.PutRecord(deliveryRecord, v.ID, data)
}

// Forget deletes delivery id's record.
func (k deliveryKeeper) Forget(id string) error { return k.st.PutRecord(deliveryRecord, id, nil) }

// restoreDeliveries hands the kept deliveries to the dispatcher.
func (o *Orchestrator) restoreDeliveries() {
	if o.hooks == nil {
		return
	}
	recs, err := o.st.Records(deliveryRecord)
	if err != nil {
		o.log.Warn("webhook: read the deliveries kept", "err", err)
		return
	}
	kept := make([]webhook.Kept, 0, len(recs))
	for id, data := range recs {
		var k webhook.Kept
		if err := json.Unmarshal(data, &k); err != nil {
			o.log.Warn("webhook: a kept delivery is unreadable; it is dropped", "delivery", id, "err", err)
			_ = o.st.PutRecord(deliveryRecord, id, nil)
			continue
		}
		kept = append(kept, k)
	}
	if len(kept) > 0 {
		o.log.Info("webhook: sending the deliveries kept from before", "deliveries", len(kept))
	}
	o.hooks.Restore(kept)
}
