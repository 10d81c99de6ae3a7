package filesd

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/testwait"
	"github.com/infrakit/infrakit/plugins/prometheus/promtest"
	"github.com/infrakit/infrakit/plugins/prometheus/query"
	"github.com/infrakit/infrakit/sdk/providertest"
)

// webserver runs testdata/webserver on a free loopback port until the test
// ends, and returns its address once it answers.
func webserver(t *testing.T, bin, id string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "INFRAKIT_INSTANCE_ID="+id)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	testwait.For(t, 30*time.Second, "webserver "+id+" answers", func() bool { return get(addr, "/health") == nil })
	return addr
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(addr, path string) error {
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s", addr, path, resp.Status)
	}
	return nil
}

func send(t *testing.T, addr, path string, n int) {
	t.Helper()
	for range n {
		if err := get(addr, path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrometheusScrapesMembers: two web servers enrolled into a file_sd
// file are discovered and scraped by a real Prometheus with the
// enrollment's labels; the requests sent to them show in
// sum(web_requests_total), queried through the promql source; revoking
// one takes it out of the active targets and out of the sum.
func TestPrometheusScrapesMembers(t *testing.T) {
	promtest.Require(t)
	bin := providertest.Build(t, "../../../testdata/webserver")
	a, dir := newAuthorizer(t)
	file := filepath.Join(dir, "prometheus", "web.json")
	prom := promtest.Start(t, promtest.Config{Files: []string{file}})
	web1, web2 := webserver(t, bin, "process-1"), webserver(t, bin, "process-2")
	labels := `{"infrakit_stack": "mystack", "infrakit_group": "web"}`
	authorize(t, a, member("process-1", "prometheus/web.json", web1, labels))
	id2 := authorize(t, a, member("process-2", "prometheus/web.json", web2, labels))

	targets := prom.WaitTargets(t, web1, web2)
	l := promtest.Labels(targets[web2])
	if l["infrakit_stack"] != "mystack" || l["infrakit_group"] != "web" || l["infrakit_instance"] != "process-2" || l["job"] != promtest.Job {
		t.Errorf("target %s has labels %v", web2, l)
	}
	if _, ok := l[RecordLabel]; ok {
		t.Errorf("the record label reached the target's labels: %v", l)
	}

	send(t, web1, "/", 3)
	send(t, web2, "/", 4)
	send(t, web2, "/health", 5)  // health checks are not load
	send(t, web2, "/metrics", 5) // nor are scrapes
	const q = `sum(web_requests_total{infrakit_group="web"})`
	prom.WaitValue(t, q, "7 requests counted", func(v float64) bool { return v == 7 })

	src, err := query.New(query.Config{Address: prom.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := src.Query(ctx(t), q, time.Time{})
	if err != nil || got.Empty || got.Value != 7 {
		t.Fatalf("the promql source reads %s as %+v, %v; want 7", q, got, err)
	}
	if _, err := src.Query(ctx(t), `web_requests_total{infrakit_group="web"}`, time.Time{}); err == nil {
		t.Fatal("two members' series read as one number")
	}

	if err := a.Revoke(ctx(t), id2); err != nil {
		t.Fatal(err)
	}
	prom.WaitTargets(t, web1)
	prom.WaitValue(t, q, "only the member left counted", func(v float64) bool { return v == 3 })
}
