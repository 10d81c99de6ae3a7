package container

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/instance"
)

// fixedIPSubnet is the test network's subnet: an unusual private /24, so
// it does not clash with a network already on the host.
const fixedIPSubnet = "10.213.47.0/24"

// A pet with fixed_ip has its logical ID as its address, and a replacement
// made after it was destroyed has the same one; a pet whose logical ID is
// not an IPv4 address is refused before anything is created.
func TestFixedIPPet(t *testing.T) {
	needDocker(t)
	network := "infrakit-fixedip-" + randomHex(4)
	if out, err := exec.Command("docker", "network", "create", "--subnet", fixedIPSubnet,
		"--label", TagRun+"="+runID, network).CombinedOutput(); err != nil {
		t.Skipf("cannot create a test network with subnet %s: %v\n%s", fixedIPSubnet, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("docker", "network", "rm", network).CombinedOutput(); err != nil {
			t.Errorf("remove network %s: %v\n%s", network, err, out)
		}
	})
	p := newProvider(t, "")
	props := fmt.Appendf(nil, `{"image": %q, "env": {"PORT": "8080"}, "memory": "32m", "stop_timeout": "1s", "network": %q, "fixed_ip": true}`, image, network)
	tags := map[string]string{TagRun: runID, "infrakit.group": "pets-" + randomHex(3)}
	lid := instance.LogicalID("10.213.47.21")

	for round := range 2 {
		id, err := p.Provision(t.Context(), instance.Spec{Properties: props, Tags: tags, LogicalID: &lid})
		if err != nil {
			t.Fatalf("round %d: provision: %v", round, err)
		}
		ds := list(t, p, tags)
		if len(ds) != 1 || ds[0].ID != id || ds[0].Address != string(lid) {
			t.Fatalf("round %d: described %+v; want one instance %s at %s", round, ds, id, lid)
		}
		if err := p.Destroy(t.Context(), id, instance.ReasonTerminate); err != nil {
			t.Fatalf("round %d: destroy: %v", round, err)
		}
	}

	bad := instance.LogicalID("db-1")
	_, err := p.Provision(t.Context(), instance.Spec{Properties: props, Tags: tags, LogicalID: &bad})
	if err == nil || !strings.Contains(err.Error(), "not an IPv4 address") {
		t.Fatalf("provision of logical ID %q: %v; want it refused as not an IPv4 address", bad, err)
	}
	if ds := list(t, p, tags); len(ds) != 0 {
		t.Fatalf("left behind: %+v", ds)
	}
}
