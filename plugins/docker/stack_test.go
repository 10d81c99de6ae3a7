package main_test

import (
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/plugins/docker/container"
	"github.com/infrakit/infrakit/plugins/healthcheck/healthcheck"
	"github.com/infrakit/infrakit/plugins/nfsexports/exports"
	"github.com/infrakit/infrakit/sdk/instance"
)

// TestStack loads testdata/docker/stack.hcl as `infrakit validate` does
// before it asks the providers, and checks each provider's properties with
// that provider's own parser: the stack the docker e2e and demo run is
// valid without Docker.
func TestStack(t *testing.T) {
	st, diags := config.Load("../../testdata/docker")
	if diags.HasErrors() {
		t.Fatalf("load testdata/docker: %s", diags.Error())
	}
	web := st.Group("web")
	if web == nil || web.Size == nil || *web.Size != 3 {
		t.Fatalf("group web: %+v; want size 3", web)
	}
	if web.Instance.Provider != "docker" || web.Instance.Type != container.Type {
		t.Errorf("web instances: %s %q; want docker %q", web.Instance.Provider, web.Instance.Type, container.Type)
	}
	props, err := container.Parse(web.Instance.Properties)
	if err != nil {
		t.Fatalf("web instance properties: %v", err)
	}
	if props.Image != "infrakit-docker-web:latest" || props.AddressPort() != 0 {
		t.Errorf("web instance properties %+v: want the demo image and no address port", props)
	}
	if len(web.Flavors) != 1 || web.Flavors[0].Provider != "healthcheck" {
		t.Fatalf("web flavors: %+v; want healthcheck", web.Flavors)
	}
	hc, err := healthcheck.Parse(web.Flavors[0].Properties)
	if err != nil {
		t.Fatalf("healthcheck properties: %v", err)
	}
	if hc.HTTP == nil || hc.HTTP.Path != "/health" || hc.Port != 8080 {
		t.Errorf("healthcheck properties %+v: want GET /health on 8080", hc)
	}

	if lb := st.LoadBalancer("web"); lb == nil || lb.Provider != "haproxy" {
		t.Errorf("load balancer web: %+v; want one served by haproxy", lb)
	}
	in := st.Ingress("web")
	if in == nil || len(in.Rules) != 1 || in.Rules[0].LoadBalancer != "web" || len(in.Rules[0].Routes) != 1 || in.Rules[0].Routes[0].Port != 8080 {
		t.Fatalf("ingress web: %+v; want web's port 8080 behind load balancer web", in)
	}

	en := st.Enrollment("exports")
	if en == nil || en.Source != "web" || en.Target.Provider != "nfsexports" || en.Target.Type != exports.Type {
		t.Fatalf("enrollment exports: %+v; want web enrolled into nfsexports %q", en, exports.Type)
	}
	// A member as the docker provider describes it: its Address is the
	// container IP alone, a host the exports file takes.
	member, err := config.MemberValue(instance.Description{ID: "0123456789ab", Address: "172.17.0.2", State: instance.StateRunning,
		Tags: map[string]string{"infrakit.group": "web"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := en.Target.RenderProperties(member)
	if err != nil {
		t.Fatalf("enrollment properties for a member: %v", err)
	}
	p, err := exports.ParseProperties(raw, true)
	if err != nil {
		t.Fatalf("enrollment properties %s: %v", raw, err)
	}
	if p.Host != "172.17.0.2" {
		t.Errorf("export host %q; want the member's address", p.Host)
	}
}
