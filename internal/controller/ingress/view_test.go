package ingress

import (
	"encoding/json"
	"testing"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// A View reads as `ingress describe -json` prints it: routes as `lb routes
// ls -json`, backends with their addresses, and empty lists as [].
func TestViewOf(t *testing.T) {
	v := ViewOf("lb2",
		[]loadbalancer.Route{{LoadBalancerPort: 8080, LoadBalancerProtocol: "https", Port: 8080, Protocol: "http", Certificate: "external-cer-id2"}},
		[]loadbalancer.Backend{{ID: "i-1", Address: "10.0.0.1"}, {ID: "i-2"}})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"loadbalancer":"lb2","routes":[{"lb_port":8080,"lb_protocol":"https","port":8080,"protocol":"http","certificate":"external-cer-id2"}],` +
		`"backends":[{"id":"i-1","address":"10.0.0.1"},{"id":"i-2"}]}`
	if string(b) != want {
		t.Fatalf("view\n got %s\nwant %s", b, want)
	}
	if b, _ := json.Marshal(ViewOf("lb1", nil, nil)); string(b) != `{"loadbalancer":"lb1","routes":[],"backends":[]}` {
		t.Fatalf("empty view %s", b)
	}
}
