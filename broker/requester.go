package broker

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
)

// Requester sends requests and takes their answers on reply subjects it makes
// itself: a prefix that names who may answer (ControlReplies(agentID) for an
// agent, ForwardReplies for the orchestrators of a group), then a nonce from
// crypto/rand. nats.go's own reply subjects end in tokens drawn from math/rand
// seeded with the clock, which a peer that sees a few of them can predict; and
// they all lie under one prefix, so whoever may answer one may answer all. Here
// the broker lets only the intended peer publish under the prefix, and the nonce
// keeps even that peer to the requests it was sent.
//
// An answer counts only on the exact subject of its request: one on any other
// subject under the inbox is dropped.
type Requester struct {
	nc  *nats.Conn
	sub *nats.Subscription

	mu      sync.Mutex
	pending map[string]chan *nats.Msg // reply subject -> its call's answers
	closed  bool
}

// ErrRequesterClosed is what a call made after Close returns.
var ErrRequesterClosed = errors.New("broker: requester closed")

// NewRequester subscribes to every subject under inbox (which the connection's
// identity must be allowed to read) and returns a Requester whose reply prefixes
// lie under it. Close unsubscribes.
func NewRequester(nc *nats.Conn, inbox string) (*Requester, error) {
	r := &Requester{nc: nc, pending: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(inbox+".>", r.take)
	if err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

// take hands an answer to the call waiting on its subject; answers nobody waits
// for are dropped, and so are answers past the call's buffer.
func (r *Requester) take(msg *nats.Msg) {
	r.mu.Lock()
	ch := r.pending[msg.Subject]
	r.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- msg:
	default:
	}
}

// Call is one request in flight: its answers come from Next until Close.
type Call struct {
	r     *Requester
	reply string
	ch    chan *nats.Msg
}

// callBuffer is how many answers a call keeps before Next reads them: a probe
// may meet more than one process.
const callBuffer = 8

// Send publishes msg with a reply subject of replies.<nonce> and returns the call
// that collects its answers. msg itself is not changed.
func (r *Requester) Send(msg *nats.Msg, replies string) (*Call, error) {
	c := &Call{r: r, reply: replies + "." + NewNonce(), ch: make(chan *nats.Msg, callBuffer)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrRequesterClosed
	}
	r.pending[c.reply] = c.ch
	r.mu.Unlock()
	out := *msg
	out.Reply = c.reply
	if err := r.nc.PublishMsg(&out); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Next returns the call's next answer. It returns nats.ErrNoResponders when the
// server says nobody subscribes to the request's subject, and ctx's error when
// ctx ends first.
func (c *Call) Next(ctx context.Context) (*nats.Msg, error) {
	select {
	case msg := <-c.ch:
		if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
			return nil, nats.ErrNoResponders
		}
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking answers for the call.
func (c *Call) Close() {
	c.r.mu.Lock()
	delete(c.r.pending, c.reply)
	c.r.mu.Unlock()
}

// Request sends msg (see Send) and returns its first answer (see Next).
func (r *Requester) Request(ctx context.Context, msg *nats.Msg, replies string) (*nats.Msg, error) {
	c, err := r.Send(msg, replies)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Next(ctx)
}

// Close unsubscribes; calls made after it fail with ErrRequesterClosed.
func (r *Requester) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return r.sub.Unsubscribe()
}
