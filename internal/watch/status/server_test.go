package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// serve starts a Server for r on a free loopback port and returns its base
// URL and a client whose connections the test closes, so goleak sees no
// keep-alive goroutine left behind.
func serve(t *testing.T, r *Recorder) (string, *http.Client) {
	t.Helper()
	s := NewServer(r, nil)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(func() {
		// Close the client's idle connections first: one the transport
		// dialled but never used looks to the server like a request still
		// arriving, which Shutdown waits on (net/http gives such a
		// connection 5 s).
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return "http://" + s.Addr().String(), &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestServeStatus(t *testing.T) {
	r, _ := fixture(t)
	base, c := serve(t, r)
	resp, body := get(t, c, base+PathStatus)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", PathStatus, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
	// The wire document is the golden one (same fixture, same clock).
	golden(t, "status.json", []byte(strings.TrimSuffix(string(body), "\n")))
	var s Status
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Groups) != 2 || s.Groups[1].Name != "miners" || s.Groups[1].Actual != 4 {
		t.Errorf("decoded status = %+v", s)
	}
}

func TestServeEvents(t *testing.T) {
	clk := newClock()
	r := NewRecorder(Options{Now: clk.Now})
	start := clk.Now()
	for i := range 10 {
		r.Event(Event{Kind: EventCreated, Group: "g", Instance: instance.ID(fmt.Sprintf("i-%d", i))})
		clk.Advance(time.Second)
	}
	base, c := serve(t, r)
	ids := func(q string) []string {
		t.Helper()
		resp, body := get(t, c, base+PathEvents+q)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %s %s", PathEvents, q, resp.Status, body)
		}
		var es []Event
		if err := json.Unmarshal(body, &es); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		out := []string{}
		for _, e := range es {
			out = append(out, string(e.Instance))
		}
		return out
	}
	at := func(d time.Duration) string { return url.QueryEscape(start.Add(d).Format(time.RFC3339Nano)) }
	tests := []struct {
		query string
		want  string
	}{
		{"", "i-0 i-1 i-2 i-3 i-4 i-5 i-6 i-7 i-8 i-9"},
		{"?limit=3", "i-7 i-8 i-9"},
		{"?since=" + at(7*time.Second), "i-7 i-8 i-9"},
		{"?since=" + at(7*time.Second) + "&limit=1", "i-9"},
		{"?since=" + at(time.Hour), ""},
		{"?after=8", "i-8 i-9"},
		{"?after=8&limit=1", "i-9"},
		// An offset written with a raw "+" (decoded as a space) still works.
		{"?since=2024-05-01T14:00:08+02:00", "i-8 i-9"},
		{"?since=&limit=", "i-0 i-1 i-2 i-3 i-4 i-5 i-6 i-7 i-8 i-9"},
	}
	for _, tt := range tests {
		if got := strings.Join(ids(tt.query), " "); got != tt.want {
			t.Errorf("GET %s%s = %q, want %q", PathEvents, tt.query, got, tt.want)
		}
	}
	// No events is an empty array, not null.
	if _, body := get(t, c, base+PathEvents+"?after=100"); strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("no events = %s, want []", body)
	}
	for _, q := range []string{"?since=yesterday", "?limit=0", "?limit=-1", "?limit=x", "?after=-1"} {
		resp, body := get(t, c, base+PathEvents+q)
		var e errorBody
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("GET %s%s = %s %s, want 400 with a JSON error", PathEvents, q, resp.Status, body)
		}
	}
}

func TestServeMetrics(t *testing.T) {
	r, _ := fixture(t)
	// Other parts of watch register beside these.
	extra := prometheus.NewCounter(prometheus.CounterOpts{Name: "infrakit_test_extra_total", Help: "A test counter."})
	r.Registerer().MustRegister(extra)
	extra.Inc()
	base, c := serve(t, r)
	resp, body := get(t, c, base+PathMetrics)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", PathMetrics, resp.Status)
	}
	// Nothing leaked into the process-global registry.
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "infrakit_") {
			t.Errorf("%s is registered globally", mf.GetName())
		}
	}
	text := string(body)
	for _, name := range []string{
		MetricPassDuration, MetricPasses, MetricLastPass, MetricInstances, MetricGroupDesiredSize,
		MetricGroupBraked, MetricBrakeEngaged, MetricReplacements, MetricProviderErrors, MetricProviderRestarts, MetricLeader,
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(text, "# TYPE "+name+" ") {
			t.Errorf("scrape lacks %s", name)
		}
	}
	for _, line := range []string{
		`infrakit_pass_duration_seconds_count 1`,
		`infrakit_passes_total{result="error"} 1`,
		`infrakit_passes_total{result="ok"} 0`,
		`infrakit_last_pass_timestamp_seconds 1.71456481025e+09`,
		`infrakit_instances{group="miners",health="healthy",state="running"} 2`,
		`infrakit_instances{group="miners",health="unhealthy",state="running"} 1`,
		`infrakit_instances{group="miners",health="unknown",state="pending"} 1`,
		`infrakit_instances{group="miners",health="unhealthy",state="terminating"} 1`,
		`infrakit_instances{group="miners",health="healthy",state="pending"} 0`,
		`infrakit_group_desired_size{group="miners"} 5`,
		`infrakit_group_desired_size{group="db"} 3`,
		`infrakit_group_braked{group="db"} 1`,
		`infrakit_group_braked{group="miners"} 0`,
		`infrakit_replacements_total{group="miners",reason="unhealthy"} 1`,
		`infrakit_provider_errors_total{method="Provision",provider="simulator"} 1`,
		`infrakit_provider_restarts_total{provider="simulator"} 0`,
		`infrakit_provider_restarts_total{provider="vanilla"} 1`,
		`infrakit_leader 1`,
		`infrakit_test_extra_total 1`,
	} {
		if !strings.Contains(text, "\n"+line+"\n") {
			t.Errorf("scrape lacks line %q", line)
		}
	}

	// A group and a provider that leave the stack leave the scrape too, and
	// an odd state seen once does not linger.
	r.SetGroup(GroupReport{Name: "miners", Desired: group.Desired{Size: size(1)},
		Members: []group.Member{member("x", "stopped", flavor.HealthHealthy)}})
	_, body = get(t, c, base+PathMetrics)
	if !strings.Contains(string(body), `infrakit_instances{group="miners",health="healthy",state="stopped"} 1`) {
		t.Errorf("odd state not exported:\n%s", body)
	}
	r.SetGroup(GroupReport{Name: "miners", Desired: group.Desired{Size: size(1)}})
	r.RemoveGroup("db")
	r.RemoveProvider("vanilla")
	_, body = get(t, c, base+PathMetrics)
	for _, gone := range []string{`state="stopped"`, `group="db"`, `provider="vanilla"`} {
		if strings.Contains(string(body), gone) {
			t.Errorf("scrape still has %s", gone)
		}
	}
	if !strings.Contains(string(body), `infrakit_instances{group="miners",health="healthy",state="running"} 0`) {
		t.Errorf("a standard series vanished when its count fell to 0")
	}
}

func TestServeErrors(t *testing.T) {
	r := NewRecorder(Options{})
	base, c := serve(t, r)
	for _, p := range []string{"/", "/v1", "/v1/status/", "/v2/status", "/nope"} {
		resp, body := get(t, c, base+p)
		var e errorBody
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("GET %s = %s %s, want 404 with a JSON error", p, resp.Status, body)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
	}
	for _, p := range []string{PathStatus, PathEvents, PathMetrics} {
		resp, err := c.Post(base+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e errorBody
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" ||
			json.Unmarshal(body, &e) != nil {
			t.Errorf("POST %s = %s Allow=%q %s, want 405", p, resp.Status, resp.Header.Get("Allow"), body)
		}
		head, err := c.Head(base + p)
		if err != nil {
			t.Fatal(err)
		}
		head.Body.Close()
		if head.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s = %s", p, head.Status)
		}
	}
}

func TestServerLifecycle(t *testing.T) {
	if DefaultListen != "127.0.0.1:24864" {
		t.Errorf("DefaultListen = %q", DefaultListen)
	}
	r := NewRecorder(Options{})
	s := NewServer(r, nil)
	if s.Addr() != nil {
		t.Error("Addr before Start")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Start: %v", err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("a second Start succeeded")
	}
	// The address is taken: another server says so at once.
	other := NewServer(r, nil)
	if err := other.Start(addr); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Start on a busy address = %v, want an error naming it", err)
		_ = other.Shutdown(context.Background())
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Error("still listening after Shutdown")
	}
}

// A client stuck mid-request cannot hold Shutdown past the caller's
// deadline: the connection is cut and Shutdown says so.
func TestShutdownDeadline(t *testing.T) {
	s := NewServer(NewRecorder(Options{}), nil)
	// Shutdown waits for the connections the server tracks (a new one
	// counts as busy for its first 5s); one the server has not accepted
	// yet it never sees, and would return at once.
	accepted := make(chan struct{}, 1)
	s.connState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the server never accepted the connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = s.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Shutdown took %v", took)
	}
	// The server closed the stuck connection.
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("read on the stuck connection = %v, want it closed", err)
	}
}

// The loop updates while clients read all three endpoints; under -race this
// proves the locking, and every snapshot read must be self-consistent.
func TestConcurrentUpdatesWhileServing(t *testing.T) {
	r := NewRecorder(Options{EventCapacity: 50})
	base, c := serve(t, r)

	const passes = 200
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Writers: the loop, plus a supervisor recording provider trouble.
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range passes {
			start := time.Now()
			for _, name := range []string{"a", "b", "c"} {
				n := i % 7
				members := make([]group.Member, n)
				for j := range members {
					members[j] = member(fmt.Sprintf("%s-%d", name, j), instance.StateRunning,
						[]flavor.Health{flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown}[j%3])
				}
				r.SetGroup(GroupReport{Name: name, Desired: group.Desired{Size: size(n)}, Members: members,
					Braked: i%11 == 0, BrakeReason: "test"})
				r.Replacement(name, instance.ID(fmt.Sprint(i)), group.ReasonUnhealthy, "test")
			}
			if i%50 == 49 {
				r.RemoveGroup("c")
			}
			r.ObservePass(start, time.Since(start), nil)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range passes {
			r.ProviderError("simulator", "Provision", errors.New("boom"))
			if i%10 == 0 {
				r.ProviderRestart("simulator", i, nil)
				r.SetLeader(i%20 == 0, "")
			}
		}
	}()
	// Readers over real HTTP until the writers are done.
	var readers sync.WaitGroup
	for _, p := range []string{PathStatus, PathEvents + "?limit=5", PathMetrics} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for ctx.Err() == nil {
				resp, err := c.Get(base + p)
				if err != nil {
					report(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					report(fmt.Errorf("GET %s: %v %s", p, err, resp.Status))
					return
				}
				if p == PathStatus {
					var s Status
					if err := json.Unmarshal(body, &s); err != nil {
						report(err)
						return
					}
					for _, g := range s.Groups {
						if h := g.Health; h.Healthy+h.Unhealthy+h.Unknown != g.Actual || g.Actual != g.Desired {
							report(fmt.Errorf("torn group snapshot: %+v", g))
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := r.Status()
	if s.Passes != passes {
		t.Errorf("passes = %d, want %d", s.Passes, passes)
	}
	if p := s.Providers[0]; p.Restarts != passes/10 {
		t.Errorf("restarts = %d, want %d", p.Restarts, passes/10)
	}
	ev := r.Events(EventQuery{})
	if len(ev) != 50 {
		t.Errorf("ring holds %d events, want its capacity 50", len(ev))
	}
	for i := 1; i < len(ev); i++ {
		if ev[i].Seq != ev[i-1].Seq+1 {
			t.Fatalf("events out of order or with gaps: %d then %d", ev[i-1].Seq, ev[i].Seq)
		}
	}
}
