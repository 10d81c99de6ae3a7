package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Event is one message of GET /events (the fields used here).
type Event struct {
	// Type is "container", "image", "network"...
	Type string `json:"Type"`
	// Action is "create", "start", "die", "oom", "stop", "destroy"...
	Action string `json:"Action"`
	Actor  struct {
		ID string `json:"ID"`
		// Attributes of a container event are its labels, plus "name" and "image".
		Attributes map[string]string `json:"Attributes"`
	} `json:"Actor"`
	TimeNano int64 `json:"timeNano"`
}

// EventStream is an open GET /events. Read it with Next from one goroutine;
// Close it from any.
type EventStream struct {
	resp   *http.Response
	dec    *json.Decoder
	cancel context.CancelFunc
	once   sync.Once
}

// Events opens the Engine's event stream, filtered by f, from since (zero:
// from now on; the Engine replays the events it still holds since then).
// It returns once the Engine has answered, so no event after that is missed;
// the stream lives until ctx ends, Close is called or the Engine closes it.
func (c *Client) Events(ctx context.Context, f Filters, since time.Time) (*EventStream, error) {
	q := url.Values{}
	if len(f) > 0 {
		q.Set("filters", f.encode())
	}
	if !since.IsZero() {
		q.Set("since", fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()))
	}
	ctx, cancel := context.WithCancel(ctx)
	// The deadline covers the answer's headers only: after that the stream
	// is ctx's to end.
	answered := make(chan struct{})
	go func() {
		select {
		case <-answered:
		case <-time.After(c.timeout):
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := c.open(ctx, request{method: http.MethodGet, path: "/events", query: q})
	close(answered)
	if err != nil {
		cancel()
		return nil, err
	}
	return &EventStream{resp: resp, dec: json.NewDecoder(resp.Body), cancel: cancel}, nil
}

// Next blocks until the next event. An error ends the stream: io.EOF when
// the Engine closed it, the context's error when it was closed here.
func (s *EventStream) Next() (Event, error) {
	var e Event
	if err := s.dec.Decode(&e); err != nil {
		return Event{}, err
	}
	return e, nil
}

// Close ends the stream; a blocked Next returns.
func (s *EventStream) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.resp.Body.Close()
	})
	return nil
}

// Time is when the event happened.
func (e Event) Time() time.Time { return time.Unix(0, e.TimeNano) }
