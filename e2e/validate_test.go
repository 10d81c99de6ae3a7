package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EStackValidates: the DESIGN.md example stack (testdata/e2e) passes
// validate with its providers installed, and its groups apply.
func TestE2EStackValidates(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	if res := w.ok("validate"); !strings.Contains(res.stdout, "Success!") {
		t.Errorf("validate output:\n%s", res)
	}
	w.expect(2, "plan", "-detailed-exitcode")
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")

	groups := w.groups()
	if n := len(groups["miners"].Instances); n != 5 {
		t.Errorf("miners has %d instances, want 5", n)
	}
	if n := len(groups["cattle"].Instances); n != 10 {
		t.Errorf("cattle has %d instances, want 10", n)
	}
	if files := w.simulatorInstances("compute"); len(files) != 15 {
		t.Errorf("simulator holds %d compute instances, want 15", len(files))
	}
}

// typoStack misspells size as sise on line 8.
const typoStack = `stack "typo" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  tags = { tier = "web" }
  sise = 3
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`

// TestValidateBadInput: a misspelled attribute fails validate (and plan)
// with the file, line and column and the line itself shown.
func TestValidateBadInput(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", typoStack)
	for _, verb := range []string{"validate", "plan"} {
		res := w.expect(1, verb)
		for _, want := range []string{"on main.hcl:8:3", "sise = 3", `"sise"`} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%s: stderr lacks %q\n%s", verb, want, res)
			}
		}
	}
}

// TestValidateSharedLoadBalancer: two ingresses naming one load balancer
// would undo each other's routes and backends, so the stack is refused when
// it is loaded: init, validate, plan and apply fail, pointing at both
// places, and nothing is made.
func TestValidateSharedLoadBalancer(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/e2e")
	w.init()
	b, err := os.ReadFile(filepath.Join(w.dir, "stack.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	w.writeFile("stack.hcl", string(b)+`
ingress "other.com" {
  rule {
    loadbalancer = loadbalancer.lb1
    groups       = [group.cattle]
    route {
      lb_port  = 443
      port     = 8443
    }
  }
}
`)
	for _, verb := range [][]string{{"init", "-plugin-dir", binDir}, {"validate"}, {"plan"}, {"apply", "-auto-approve"}} {
		res := w.expect(1, verb...)
		for _, want := range []string{"Load balancer shared by ingresses", `in ingress "other.com"`, `Load balancer "lb1" is already named by ingress "test.com" at stack.hcl:`} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%s: stderr lacks %q\n%s", verb[0], want, res)
			}
		}
	}
	if files := w.simulatorInstances("compute"); len(files) != 0 {
		t.Errorf("a refused stack made instances: %q", files)
	}
}
