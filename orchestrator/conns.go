package orchestrator

import (
	"fmt"

	"github.com/chiffon-dev/chiffon/broker"
	"github.com/nats-io/nats.go"
)

// The orchestrator's NATS connections. nc subscribes to the registry and the
// task inboxes, sends work and control to agents and answers them; its
// requester takes the answers to what it asks. storeNC, under an identity of its
// own, holds the JetStream task store: it subscribes to nothing but its inbox and
// answers nothing, so no sender can make the orchestrator publish on the store's
// subjects, and the broker refuses them to nc.

// connect opens the connections opts does not give: nc as the nats section's
// identity, and with store.kind jetstream the store's as store.jetstream.nats.
func (o *Orchestrator) connect(opts Options) error {
	var err error
	o.nc = opts.Conn
	if o.nc == nil {
		if err := o.cfg.NATS.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		o.ownConn = true
		cc := o.cfg.NATS.ConnConfig("chiffon-orchestrator-" + o.id)
		cc.Logger = o.log
		cc.OnDisconnect = func(*nats.Conn, error) { o.link.Down() }
		cc.OnReconnect = func(*nats.Conn) { o.link.Up(); o.rediscover() }
		cc.InboxPrefix = o.subj.Inbox(broker.RoleOrchestrator, "")
		if o.nc, err = broker.Connect(cc); err != nil {
			o.nc = nil
			return fmt.Errorf("connect to NATS: %w", err)
		}
	}
	if o.req, err = broker.NewRequester(o.nc, o.subj.Inbox(broker.RoleOrchestrator, "")); err != nil {
		return fmt.Errorf("subscribe to the orchestrator's inbox: %w", err)
	}
	if o.cfg.Store.Kind != StoreJetStream || opts.Store != nil {
		return nil
	}
	switch {
	case opts.StoreConn != nil:
		o.storeNC = opts.StoreConn
	case opts.Conn != nil:
		o.storeNC = opts.Conn
	default:
		if o.storeNC, err = storeConn(o.cfg, "chiffon-orchestrator-store-"+o.id, o.log); err != nil {
			return err
		}
		o.ownStoreConn = true
	}
	return nil
}

// closeConns stops the requester and closes the connections connect opened.
func (o *Orchestrator) closeConns() {
	if o.req != nil {
		_ = o.req.Close()
	}
	if o.ownStoreConn && o.storeNC != nil {
		o.storeNC.Close()
	}
	if o.ownConn && o.nc != nil {
		o.nc.Close()
	}
}

// rediscover asks every agent to register again with the running core.
func (o *Orchestrator) rediscover() {
	if c := o.running.Load(); c != nil {
		c.Discover()
	}
}
