package wire

import (
	"errors"
	"io"
	"sync"
)

// ErrClosed is a call on a channel the main process closed.
var ErrClosed = errors.New("codexgate is gone")

// Client is the panel's end of the channel. Run reads the updates; Call
// may be used from any goroutine.
type Client struct {
	w *Writer
	r *Reader

	mu      sync.Mutex // protects next, waiting, closed
	next    uint64
	waiting map[uint64]chan Reply
	closed  bool
}

// NewClient talks over rw.
func NewClient(rw io.ReadWriter) *Client {
	r := NewReader(rw, MaxUpdate)
	r.lenient = true
	return &Client{w: NewWriter(rw), r: r, waiting: map[uint64]chan Reply{}}
}

// Run hands each State and Show to its callback, in order, until the
// channel closes; then every pending Call fails with ErrClosed.
func (c *Client) Run(onState func(State), onShow func(Show)) error {
	defer c.close()
	for {
		var u Update
		if err := c.r.Read(&u); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch {
		case u.State != nil:
			onState(*u.State)
		case u.Show != nil:
			onShow(*u.Show)
		case u.Reply != nil:
			c.mu.Lock()
			ch := c.waiting[u.Reply.ID]
			delete(c.waiting, u.Reply.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- *u.Reply
			}
		}
	}
}

func (c *Client) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, ch := range c.waiting {
		close(ch)
		delete(c.waiting, id)
	}
}

// Call sends req and waits for its reply; a refusal is an error.
func (c *Client) Call(req Request) (Reply, error) {
	ch := make(chan Reply, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Reply{}, ErrClosed
	}
	c.next++
	req.ID = c.next
	c.waiting[req.ID] = ch
	c.mu.Unlock()
	if err := c.w.Write(req); err != nil {
		c.mu.Lock()
		delete(c.waiting, req.ID)
		c.mu.Unlock()
		return Reply{}, err
	}
	reply, ok := <-ch
	if !ok {
		return Reply{}, ErrClosed
	}
	if reply.Error != "" {
		return reply, errors.New(reply.Error)
	}
	return reply, nil
}
