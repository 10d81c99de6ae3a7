package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// keepAlive is how often an idle event stream sends a comment, so that
// proxies and browsers keep the connection.
const keepAlive = 15 * time.Second

// wantsStream: the client asks GET /v1/events for Server-Sent Events.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// serveStream streams the events as Server-Sent Events: id is the seq,
// event the kind, data the event's JSON. A client resuming with
// Last-Event-ID (or ?after=) gets every later event the ring still holds
// first. The stream lasts until the client goes or the server shuts down.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	after, err := resumeFrom(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	// The server's timeouts are for answers, not for a stream.
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		evs, added := s.rec.EventsAfter(after)
		for _, e := range evs {
			data, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, data); err != nil {
				return
			}
			after = e.Seq
		}
		if len(evs) > 0 {
			if err := rc.Flush(); err != nil {
				return
			}
		}
		select {
		case <-added:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		}
	}
}

// resumeFrom is the seq a stream starts after: Last-Event-ID, else
// ?after=, else 0 (every event the ring holds).
func resumeFrom(r *http.Request) (uint64, error) {
	v := r.Header.Get("Last-Event-ID")
	name := "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want an event sequence number (0 or more), got %q", name, v)
	}
	return n, nil
}
