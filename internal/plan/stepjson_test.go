package plan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// A step's nested objects travel in the CLI's shapes (snake_case, durations
// as "2s"), and read back as they were.
func TestStepJSON(t *testing.T) {
	route := loadbalancer.Route{LoadBalancerPort: 443, LoadBalancerProtocol: "https", Port: 8080, Protocol: "http", Certificate: "c"}
	old := route
	old.Certificate = "old"
	steps := []Step{
		{ID: 2, Kind: StepRepublish, Object: "ingress.web", Provider: "haproxy", LoadBalancer: "web", Route: &route, OldRoute: &old, After: []StepID{1}},
		{ID: 3, Kind: StepHealthCheck, Object: "ingress.web", LoadBalancer: "web",
			HealthCheck: &loadbalancer.HealthCheck{BackendPort: 8080, Healthy: 2, Unhealthy: 2, Interval: 2 * time.Second, Timeout: time.Second}},
		{ID: 4, Kind: StepDeregister, Object: "ingress.web", LoadBalancer: "web", Instance: "i-1",
			Backend: &loadbalancer.Backend{ID: "i-1", Address: "127.0.0.1:21001"}},
		{ID: 5, Kind: StepRevoke, Object: "enrollment.nfs", Instance: "i-1", Reason: "member-gone",
			Authorization: &nfs.Authorization{ID: "a-1", SourceID: "i-1", Host: "h", Properties: []byte(`{"host":"h"}`),
				Tags: map[string]string{"infrakit.enrollment.name": "nfs"}}},
		{ID: 6, Kind: StepAwait, Object: "group.web", Group: "web", Made: 7, Awaited: 0, Healthy: true, Timeout: 300000000000},
	}
	b, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{`"route":{"lb_port":443,"lb_protocol":"https","port":8080,"protocol":"http","certificate":"c"}`,
		`"old_route":{"lb_port":443`, `"health_check":{"backend_port":8080,"healthy":2,"unhealthy":2,"interval":"2s","timeout":"1s"}`,
		`"backend":{"id":"i-1","address":"127.0.0.1:21001"}`, `"authorization":{"id":"a-1","source_id":"i-1","host":"h"`,
		`"timeout":"5m0s"`} {
		if !strings.Contains(text, want) {
			t.Errorf("JSON lacks %s:\n%s", want, text)
		}
	}
	for _, goName := range []string{"LoadBalancerPort", "SourceID", "BackendPort"} {
		if strings.Contains(text, goName) {
			t.Errorf("JSON has the Go field name %s:\n%s", goName, text)
		}
	}
	var back []Step
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, steps) {
		t.Errorf("read back\n%+v\nwant\n%+v", back, steps)
	}
}
