package ingress

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Changes read as JSON in the CLI's shapes (a route as `lb routes ls
// -json`, durations as "2s"), and read back as they were written.
func TestChangesJSON(t *testing.T) {
	route := loadbalancer.Route{LoadBalancerPort: 8080, LoadBalancerProtocol: "https", Port: 8080, Protocol: "http", Certificate: "external-cer-id2"}
	old := route
	old.Certificate = "old"
	hc := DefaultHealthCheck
	hc.BackendPort = 8080
	ch := Changes{
		LoadBalancer: "lb2",
		Publish:      []loadbalancer.Route{route},
		Republish:    []RouteChange{{Old: old, New: route}},
		Unpublish:    []loadbalancer.Route{{LoadBalancerPort: 81, LoadBalancerProtocol: "tcp", Port: 81, Protocol: "tcp"}},
		HealthCheck:  &hc,
		Register:     []loadbalancer.Backend{{ID: "i-1", Address: "10.0.0.1"}},
		Readdress:    []BackendChange{{Old: loadbalancer.Backend{ID: "i-2", Address: "a"}, New: loadbalancer.Backend{ID: "i-2", Address: "b"}}},
		Deregister:   []loadbalancer.Backend{{ID: "i-3"}},
		BackendsHeld: true,
	}
	b, err := json.Marshal(ch)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, bad := range []string{"LoadBalancerPort", "Protocol\"", "Certificate", "BackendPort", "Interval", `"ID"`, "2000000000"} {
		if strings.Contains(s, bad) {
			t.Errorf("JSON has %s: %s", bad, s)
		}
	}
	for _, good := range []string{
		`"publish":[{"lb_port":8080,"lb_protocol":"https","port":8080,"protocol":"http","certificate":"external-cer-id2"}]`,
		`"republish":[{"old":{"lb_port":8080`, `"health_check":{"backend_port":8080,"healthy":2,"unhealthy":2,"interval":"2s","timeout":"1s"}`,
		`"register":[{"id":"i-1","address":"10.0.0.1"}]`, `"deregister":[{"id":"i-3"}]`, `"backends_held":true`,
	} {
		if !strings.Contains(s, good) {
			t.Errorf("JSON lacks %s: %s", good, s)
		}
	}
	var back Changes
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ch) {
		t.Fatalf("read back:\n got %+v\nwant %+v", back, ch)
	}
	if b, _ := json.Marshal(Changes{LoadBalancer: "lb1"}); string(b) != `{"loadbalancer":"lb1"}` {
		t.Fatalf("empty changes: %s", b)
	}
}
