package status

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// readEvent reads one SSE message: its id and event lines.
func readEvent(t *testing.T, sc *bufio.Scanner) (id, kind string) {
	t.Helper()
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" && id != "":
			return id, kind
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		}
	}
	t.Fatalf("the stream ended: %v", sc.Err())
	return "", ""
}

// The stream resumes after Last-Event-ID with the events the ring holds,
// then sends each new event as it is recorded; Shutdown ends it.
func TestEventStreamResumes(t *testing.T) {
	r := NewRecorder(Options{})
	for _, k := range []EventKind{EventCreated, EventDestroyed, EventReplaced} {
		r.Event(Event{Kind: k, Group: "web"})
	}
	base, c := serve(t, r)
	req, err := http.NewRequest(http.MethodGet, base+PathEvents, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("%s, Content-Type %q", resp.Status, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for _, want := range [][2]string{{"2", "destroyed"}, {"3", "replaced"}} {
		if id, kind := readEvent(t, sc); id != want[0] || kind != want[1] {
			t.Fatalf("got event %s %s, want %s %s", id, kind, want[0], want[1])
		}
	}
	r.Event(Event{Kind: EventBrake, Group: "web"})
	if id, kind := readEvent(t, sc); id != "4" || kind != "brake" {
		t.Fatalf("got event %s %s after the stream caught up, want 4 brake", id, kind)
	}
}

// A bad Last-Event-ID is a 400, as a bad ?after= is.
func TestEventStreamBadResume(t *testing.T) {
	base, c := serve(t, NewRecorder(Options{}))
	req, _ := http.NewRequest(http.MethodGet, base+PathEvents, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "x")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%s, want 400", resp.Status)
	}
}
