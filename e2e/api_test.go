package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// apiCall sends method path (with body as JSON, when not nil) to the
// watch's API with token ("" sends none), and returns the status and body.
func (p *watchProc) apiCall(method, path, token string, body any) (int, []byte) {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			p.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	resp, err := http.DefaultClient.Do(p.newRequest(method, path, token, r))
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

type verbReply struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	PlanFile []byte `json:"plan_file"`
}

// The object API of a running watch: each read answers what the CLI's
// -json prints; a verb without the token (or with another) is refused and
// changes nothing; with it, it acts as the CLI does and answers what the
// CLI prints; a stack sent by the client is planned and its saved plan
// applied; the event stream shows a heal as it happens.
func TestAPIObjectsAndVerbs(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.drainAt("stack.hcl", "0s")
	w.init()
	w.ok("apply", "-auto-approve")
	p := w.startWatch(nil)

	for path, argv := range map[string][]string{
		"/v1/groups":                     {"group", "ls", "-json"},
		"/v1/groups/cattle/instances":    {"group", "ls", "cattle", "-json"},
		"/v1/state":                      {"show", "-json"},
		"/v1/loadbalancers/lb3/backends": {"lb", "backends", "ls", "lb3", "-json"},
		"/v1/loadbalancers/lb3/routes":   {"lb", "routes", "ls", "lb3", "-json"},
		"/v1/enrollments/nfs":            {"enrollment", "describe", "nfs", "-json"},
		"/v1/outputs":                    {"output", "-json"},
	} {
		code, body := p.apiCall("GET", path, p.token, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
		if local := w.ok(argv...).stdout; !sameJSON(t, body, []byte(local)) {
			t.Errorf("GET %s differs from `infrakit %s`:\n%s\n---\n%s", path, strings.Join(argv, " "), body, local)
		}
	}
	if code, body := p.apiCall("GET", "/v1/groups/nope", p.token, nil); code != http.StatusNotFound || !strings.Contains(string(body), `"summary"`) {
		t.Errorf("GET /v1/groups/nope: %d %s, want 404 with a diagnostic", code, body)
	}

	// Refused: nothing changes.
	for _, token := range []string{"", "not-the-token-not-the-token"} {
		if code, body := p.apiCall("POST", "/v1/groups/cattle/scale", token, map[string]int{"size": 12}); code != http.StatusUnauthorized {
			t.Fatalf("scale with token %q: %d %s, want 401", token, code, body)
		}
		if code, _ := p.apiCall("GET", "/v1/groups", token, nil); code != http.StatusUnauthorized {
			t.Fatalf("read with token %q: %d, want 401", token, code)
		}
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "10" {
		t.Fatalf("after refused scales the size is %s, want 10", size)
	}
	_, metrics := p.apiCall("GET", "/metrics", p.token, nil)
	for _, want := range []string{`infrakit_api_auth_failures_total{reason="missing"} 2`, `infrakit_api_auth_failures_total{reason="wrong"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The event stream, opened before an instance is removed out of band.
	stream := p.eventStream()
	code, body := p.apiCall("POST", "/v1/groups/cattle/scale", p.token, map[string]int{"size": 12})
	var rep verbReply
	if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.ExitCode != 0 || !strings.Contains(rep.Stdout, `Group "cattle" scaled to 12: 2 created`) {
		t.Fatalf("scale: %d %s", code, body)
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "12" {
		t.Fatalf("after the scale the size is %s, want 12", size)
	}
	victim := w.simulatorInstances("compute")[0]
	if err := os.Remove(filepath.Join(w.dir, ".infrakit", "simulator", "instances", "compute", victim+".json")); err != nil {
		t.Fatal(err)
	}
	stream.waitFor(t, `"kind":"replaced"`, victim)

	// A stack sent by the client (the size the files say, 10), planned,
	// then its saved plan applied.
	files := map[string][]byte{}
	for _, name := range []string{"stack.hcl"} {
		b, err := os.ReadFile(filepath.Join(w.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	code, body = p.apiCall("POST", "/v1/plan", p.token, map[string]any{"files": files})
	if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.ExitCode != 0 || len(rep.PlanFile) == 0 ||
		!strings.Contains(rep.Stdout, "12 -> 10") {
		t.Fatalf("plan: %d %s", code, body)
	}
	code, body = p.apiCall("POST", "/v1/apply", p.token, map[string]any{"plan_file": rep.PlanFile})
	if code != http.StatusOK || json.Unmarshal(body, &rep) != nil || rep.ExitCode != 0 || !strings.Contains(rep.Stdout, "Apply complete!") {
		t.Fatalf("apply of the saved plan: %d %s", code, body)
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "10" {
		t.Fatalf("after the apply the size is %s, want 10", size)
	}
}

// sseStream reads a watch's event stream in the background.
type sseStream struct {
	lines chan string
}

func (p *watchProc) eventStream() *sseStream {
	p.t.Helper()
	req := p.newRequest(http.MethodGet, "/v1/events", p.token, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("event stream: %s", resp.Status)
	}
	s := &sseStream{lines: make(chan string, 1000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default: // the test stopped reading
			}
		}
	}()
	p.t.Cleanup(func() {
		resp.Body.Close()
		<-done
	})
	return s
}

// waitFor waits for a data line holding every one of parts.
func (s *sseStream) waitFor(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				t.Fatalf("the event stream ended before %v", parts)
			}
			all := strings.HasPrefix(line, "data: ")
			for _, part := range parts {
				all = all && strings.Contains(line, part)
			}
			if all {
				return
			}
		case <-deadline:
			t.Fatalf("no event %v within a minute", parts)
		}
	}
}
