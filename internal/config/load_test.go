package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// e2eModel is testdata/e2e/stack.hcl (the DESIGN.md example) as a model.
func e2eModel() *config.Stack {
	defaults := func(g *config.Group) *config.Group {
		g.Update = config.UpdatePolicy{MaxParallel: 1, MaxUnavailable: 0, HealthTimeout: config.Duration(5 * time.Minute)}
		g.Health = config.HealthPolicy{Grace: config.Duration(30 * time.Second), ReplaceUnhealthy: true}
		g.DrainDelay = config.DefaultDrainDelay
		return g
	}
	route := func(port int, cert string) config.Route {
		return config.Route{LBPort: port, LBProtocol: loadbalancer.HTTPS, Port: port, Protocol: loadbalancer.HTTP, Certificate: cert}
	}
	return &config.Stack{
		Name: "mystack",
		Providers: []*config.Provider{
			{Name: "simulator"},
			{Name: "simulator", Alias: "nfs-auth"},
			{Name: "vanilla"},
		},
		Groups: []*config.Group{
			defaults(&config.Group{
				Name: "miners",
				Size: intPtr(5),
				Tags: map[string]string{"project": "e2e", "user": "infrakit"},
				Instance: config.Plugin{
					Provider: "simulator", Type: "compute",
					Properties: raw(`{"note":"custom field for miners"}`),
				},
				Flavors: []config.Plugin{{
					Provider:   "vanilla",
					Properties: raw(`{"init":["curl -sSL https://get.docker.com | sh","docker run -d -p 80:80 stuff/miner"],"tags":{"project":"infrakit","tier":"miners"}}`),
				}},
			}),
			defaults(&config.Group{
				Name: "cattle",
				Size: intPtr(10),
				Instance: config.Plugin{
					Provider: "simulator", Type: "compute",
					Properties: raw(`{"custom_notes":"This is custom for cattle"}`),
				},
				Flavors: []config.Plugin{{
					Provider:   "vanilla",
					Properties: raw(`{"init":["sudo apt-get install -y something"],"tags":{"tier":"web"}}`),
				}},
			}),
		},
		LoadBalancers: []*config.LoadBalancer{
			{Name: "lb1", Provider: "simulator"},
			{Name: "lb2", Provider: "simulator"},
			{Name: "lb3", Provider: "simulator"},
		},
		Ingresses: []*config.Ingress{{
			Name:         "test.com",
			SyncInterval: config.Duration(3 * time.Second),
			Rules: []config.Rule{
				{LoadBalancer: "lb1", Groups: []string{"miners"}, Routes: []config.Route{route(80, "external-cer-id1")}},
				{LoadBalancer: "lb2", Groups: []string{"miners"}, Routes: []config.Route{route(8080, "external-cer-id2")}},
				{LoadBalancer: "lb3", Groups: []string{"cattle"}, Routes: []config.Route{route(8888, "external-cer-id3")}},
			},
		}},
		Enrollments: []*config.Enrollment{{
			Name:   "nfs",
			Source: "cattle",
			Target: config.EnrollmentTarget{
				Provider:   "simulator.nfs-auth",
				Type:       "disk",
				Properties: "{ host = member.id, iops = 10 }",
			},
			SyncInterval: config.Duration(5 * time.Second),
		}},
	}
}

func TestLoadE2E(t *testing.T) {
	st, diags := config.Load("../../testdata/e2e")
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", render(st, diags))
	}

	// Ranges point into the file; spot-check the ones diagnostics use most.
	file := filepath.Join("../../testdata/e2e", "stack.hcl")
	if st.Files[file] == nil {
		t.Fatalf("Files has no %s: %v", file, st.Files)
	}
	miners := st.Group("miners")
	if got := pos("", &miners.DeclRange); got != file+":7:1" {
		t.Errorf("miners DeclRange = %s", got)
	}
	if got := pos("", &miners.Instance.TypeRange); got != file+":12:18" {
		t.Errorf("miners instance TypeRange = %s", got)
	}
	if miners.Instance.PropertiesExpr == nil || st.Enrollments[0].Target.PropertiesExpr == nil {
		t.Error("properties expressions are not kept")
	}

	assertSameModel(t, clearSource(st), e2eModel())
}

func TestLoadPets(t *testing.T) {
	st, diags := config.Load("../../testdata/pets")
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", render(st, diags))
	}
	want := &config.Stack{
		Name:      "pets",
		Providers: []*config.Provider{{Name: "simulator"}, {Name: "vanilla"}},
		Groups: []*config.Group{{
			Name:       "databases",
			LogicalIDs: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"},
			Tags:       map[string]string{"role": "db"},
			Instance:   config.Plugin{Provider: "simulator", Type: "compute", Properties: raw(`{"disk_gb":100}`)},
			Flavors:    []config.Plugin{{Provider: "vanilla", Properties: raw(`{"init":["systemctl start postgresql"]}`)}},
			Update:     config.UpdatePolicy{MaxParallel: 1, MaxUnavailable: 0, HealthTimeout: config.Duration(10 * time.Minute)},
			Health:     config.HealthPolicy{Grace: config.Duration(2 * time.Minute), ReplaceUnhealthy: true, MaxReplacementsPerHour: 2},
			DrainDelay: config.DefaultDrainDelay,
		}},
	}
	assertSameModel(t, clearSource(st), want)
	if a := st.Groups[0].Allocation(); a.Size != 0 || len(a.LogicalIDs) != 3 || a.LogicalIDs[2] != "10.0.0.3" {
		t.Errorf("Allocation() = %+v", a)
	}
}

// header is what every block test stack starts with.
const header = `
stack "s" {}
provider "sim" {}
provider "sim" { alias = "two" }
provider "van" {}
`

// group is a minimal valid group body with extra lines spliced in.
func group(name, extra string) string {
	return `group "` + name + `" {
  ` + extra + `
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = van }
}
`
}

func TestLoadBlocks(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, st *config.Stack)
	}{
		{
			name: "provider config and alias",
			src: `stack "s" {}
provider "sim" {
  dir   = "/tmp/sim"
  knobs = { delay = "1s", fail = 0.5 }
}
provider "sim" { alias = "two" }`,
			check: func(t *testing.T, st *config.Stack) {
				p := st.Providers[0]
				if p.Key() != "sim" || string(p.Config) != `{"dir":"/tmp/sim","knobs":{"delay":"1s","fail":0.5}}` {
					t.Errorf("provider = %s %s", p.Key(), p.Config)
				}
				if p2 := st.Provider("sim.two"); p2 == nil || p2.Config != nil {
					t.Errorf("aliased provider = %+v", p2)
				}
			},
		},
		{
			name: "cattle of size zero with defaults",
			src:  header + group("g", "size = 0"),
			check: func(t *testing.T, st *config.Stack) {
				g := st.Group("g")
				if g.Size == nil || *g.Size != 0 || g.LogicalIDs != nil || g.Tags != nil {
					t.Errorf("group = %+v", g)
				}
				if g.Update != config.DefaultUpdatePolicy() || g.Health != config.DefaultHealthPolicy() {
					t.Errorf("policies = %+v %+v", g.Update, g.Health)
				}
				if string(g.Instance.Properties) != `{}` || g.Flavors[0].Type != "" {
					t.Errorf("instance %+v flavor %+v", g.Instance, g.Flavors[0])
				}
			},
		},
		{
			name: "pets and tags",
			src: header + group("g", `logical_ids = ["a", "b"]
  tags = { "example.com/owner" = "me", n = 3 }`),
			check: func(t *testing.T, st *config.Stack) {
				g := st.Group("g")
				if g.Size != nil || strings.Join(g.LogicalIDs, ",") != "a,b" {
					t.Errorf("allocation = %v %v", g.Size, g.LogicalIDs)
				}
				if len(g.Tags) != 2 || g.Tags["example.com/owner"] != "me" || g.Tags["n"] != "3" {
					t.Errorf("tags = %v", g.Tags)
				}
			},
		},
		{
			name: "several flavors in order, aliased provider",
			src: header + `group "g" {
  size = 1
  instance {
    provider   = sim.two
    type       = "vm"
    properties = { n = 1, list = [1, "a", true, null], nested = { k = "v" } }
  }
  flavor {
    provider = van
    type     = "vanilla"
  }
  flavor {
    provider   = sim
    properties = null
  }
}`,
			check: func(t *testing.T, st *config.Stack) {
				g := st.Group("g")
				if g.Instance.Provider != "sim.two" || string(g.Instance.Properties) != `{"list":[1,"a",true,null],"n":1,"nested":{"k":"v"}}` {
					t.Errorf("instance = %+v %s", g.Instance, g.Instance.Properties)
				}
				if len(g.Flavors) != 2 || g.Flavors[0].Type != "vanilla" || g.Flavors[1].Provider != "sim" || string(g.Flavors[1].Properties) != `{}` {
					t.Errorf("flavors = %+v", g.Flavors)
				}
			},
		},
		{
			name: "update and health blocks",
			src: header + group("g", `size = 2
  update {
    max_parallel    = 3
    max_unavailable = 1
    health_timeout  = "90s"
  }
  health {
    grace                     = "0s"
    replace_unhealthy         = false
    max_replacements_per_hour = 6
    brake_min                 = 2
  }`),
			check: func(t *testing.T, st *config.Stack) {
				g := st.Group("g")
				want := config.UpdatePolicy{MaxParallel: 3, MaxUnavailable: 1, HealthTimeout: config.Duration(90 * time.Second)}
				if g.Update != want {
					t.Errorf("update = %+v", g.Update)
				}
				if g.Health != (config.HealthPolicy{Grace: 0, ReplaceUnhealthy: false, MaxReplacementsPerHour: 6, BrakeMin: 2}) {
					t.Errorf("health = %+v", g.Health)
				}
			},
		},
		{
			name: "partial update block keeps other defaults; null is unset",
			src:  header + group("g", "size = 1\n  update { max_unavailable = 2 }\n  health { grace = null }"),
			check: func(t *testing.T, st *config.Stack) {
				g := st.Group("g")
				if g.Update.MaxParallel != 1 || g.Update.MaxUnavailable != 2 || g.Update.HealthTimeout != config.Duration(5*time.Minute) {
					t.Errorf("update = %+v", g.Update)
				}
				if g.Health != config.DefaultHealthPolicy() {
					t.Errorf("health = %+v", g.Health)
				}
			},
		},
		{
			name: "ingress defaults",
			src: header + group("a", "size = 1") + group("b", "size = 1") + `
loadbalancer "lb" { provider = sim }
ingress "web" {
  rule {
    loadbalancer = loadbalancer.lb
    groups       = [group.a, group.b]
    route {
      lb_port = 80
      port    = 8080
    }
    route {
      lb_port     = 443
      lb_protocol = "https"
      port        = 8443
      certificate = "cert"
    }
  }
}`,
			check: func(t *testing.T, st *config.Stack) {
				in := st.Ingress("web")
				if in.SyncInterval != config.DefaultSyncInterval || len(in.Rules) != 1 {
					t.Fatalf("ingress = %+v", in)
				}
				r := in.Rules[0]
				if r.LoadBalancer != "lb" || strings.Join(r.Groups, ",") != "a,b" {
					t.Errorf("rule = %+v", r)
				}
				want := []config.Route{
					{LBPort: 80, LBProtocol: "tcp", Port: 8080, Protocol: "tcp"},
					{LBPort: 443, LBProtocol: "https", Port: 8443, Protocol: "https", Certificate: "cert"},
				}
				for i := range want {
					got := r.Routes[i]
					got.DeclRange = want[i].DeclRange
					if got != want[i] {
						t.Errorf("route %d = %+v, want %+v", i, got, want[i])
					}
				}
				spi := r.Routes[1].SPI()
				if spi.LoadBalancerPort != 443 || spi.Port != 8443 || spi.LoadBalancerProtocol != loadbalancer.HTTPS || spi.Certificate != "cert" {
					t.Errorf("SPI() = %+v", spi)
				}
				if st.LoadBalancer("lb").Provider != "sim" {
					t.Errorf("lb = %+v", st.LoadBalancer("lb"))
				}
			},
		},
		{
			name: "same lb port on two load balancers is fine",
			src: header + group("a", "size = 1") + `
loadbalancer "x" { provider = sim }
loadbalancer "y" { provider = sim }
ingress "i" {
  rule {
    loadbalancer = loadbalancer.x
    groups       = [group.a]
    route {
      port    = 80
      lb_port = 80
    }
  }
  rule {
    loadbalancer = loadbalancer.y
    groups       = [group.a]
    route {
      lb_port = 80
      port    = 80
    }
  }
}`,
			check: func(t *testing.T, st *config.Stack) {
				if len(st.Ingresses[0].Rules) != 2 {
					t.Errorf("rules = %+v", st.Ingresses[0].Rules)
				}
			},
		},
		{
			name: "enrollment defaults and destroy_on_free",
			src: header + group("a", "size = 1") + `
enrollment "e" {
  source = group.a
  target {
    provider = sim.two
    type     = "disk"
  }
}
enrollment "f" {
  source          = group.a
  destroy_on_free = true
  sync_interval   = "1m"
  target {
    provider   = sim
    type       = "disk"
    properties = {
      host = member.address
      tags = member.tags
    }
  }
}`,
			check: func(t *testing.T, st *config.Stack) {
				e := st.Enrollment("e")
				if e.Source != "a" || e.Target.Provider != "sim.two" || e.Target.Properties != "" || e.DestroyOnFree || e.SyncInterval != config.DefaultSyncInterval {
					t.Errorf("e = %+v", e)
				}
				f := st.Enrollment("f")
				wantSrc := "{\n  host = member.address\n  tags = member.tags\n}" // formatted at the top level
				if !f.DestroyOnFree || f.SyncInterval != config.Duration(time.Minute) || f.Target.Properties != wantSrc {
					t.Errorf("f = %+v", f)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustLoad(t, tt.src))
		})
	}
}

func TestLoadFiles(t *testing.T) {
	// Blocks may be spread over files in any order: references resolve
	// across files, and a hidden file (the lock file) is not a stack file.
	st, diags, dir := loadSource(t, map[string]string{
		"a_groups.hcl":       group("g", "size = 1"),
		"b_providers.hcl":    "provider \"sim\" {}\nprovider \"van\" {}\n",
		"c_stack.hcl":        `stack "split" {}`,
		".infrakit.lock.hcl": `provider "x" { version = "1" }`,
		"notes.txt":          "not a stack file",
	})
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", render(st, diags))
	}
	if st.Name != "split" || len(st.Groups) != 1 || len(st.Providers) != 2 || len(st.Files) != 3 {
		t.Errorf("stack = %+v files %v", st, st.Files)
	}

	// Extra files come after the directory's, and a file named twice is read once.
	extra := filepath.Join(t.TempDir(), "more.hcl")
	if err := os.WriteFile(extra, []byte(`loadbalancer "lb" { provider = sim }`), 0o644); err != nil {
		t.Fatal(err)
	}
	st, diags = config.Load(dir, extra, filepath.Join(dir, "c_stack.hcl"))
	if len(diags) > 0 {
		t.Fatalf("diagnostics:\n%s", render(st, diags))
	}
	if len(st.LoadBalancers) != 1 || len(st.Files) != 4 {
		t.Errorf("load balancers %v files %d", st.LoadBalancers, len(st.Files))
	}

	// Only extra files.
	st, diags = config.Load("", filepath.Join(dir, "c_stack.hcl"), filepath.Join(dir, "b_providers.hcl"))
	if len(diags) > 0 || st.Name != "split" {
		t.Errorf("extra only: %s %+v", render(st, diags), st)
	}
}

func TestLoadNoFiles(t *testing.T) {
	st, diags := config.Load(t.TempDir())
	if !diags.HasErrors() || diags[0].Summary != "No stack files" || st == nil || st.Files == nil {
		t.Errorf("diags = %v, stack = %v", diags, st)
	}
	_, diags = config.Load(filepath.Join(t.TempDir(), "missing"))
	if !diags.HasErrors() || diags[0].Summary != "Cannot read stack directory" {
		t.Errorf("diags = %v", diags)
	}
}

func TestDirFiles(t *testing.T) {
	// DirFiles lists what Load reads of a directory: the stack files, the
	// files that may be specifications and the variable files, not the
	// lock file, the state, other files or subdirectories. A directory
	// holding only those loads the same stack.
	st, diags, dir := loadSource(t, map[string]string{
		"main.hcl":            "stack \"s\" {}\nprovider \"sim\" {}\nprovider \"van\" {}\nvariable \"size\" { type = number }\n" + group("g", "size = var.size"),
		"infrakit.ivars":      "size = 2\n",
		"prod.auto.ivars":     "size = 3\n",
		"spec.json":           webGroupJSON,
		"notes.yaml":          "just: notes\n",
		".infrakit.lock.hcl":  `provider "x" { version = "1" }`,
		"infrakit.state.json": `{"version": 1}`,
		"README.md":           "not a stack file",
		"other.ivars":         "size = 9\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.hcl"), 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := config.DirFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range names {
		got = append(got, filepath.Base(n))
	}
	want := []string{"infrakit.ivars", "main.hcl", "notes.yaml", "prod.auto.ivars", "spec.json"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("DirFiles = %q, want %q", got, want)
	}
	copyDir := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.Mkdir(copyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, filepath.Base(n)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	again, againDiags := config.Load(copyDir)
	if diags.HasErrors() {
		t.Fatalf("the directory does not load:\n%s", render(st, diags))
	}
	size := func(st *config.Stack) int {
		for _, g := range st.Groups {
			if g.Name == "g" && g.Size != nil {
				return *g.Size
			}
		}
		return -1
	}
	if render(st, diags) != strings.ReplaceAll(render(again, againDiags), copyDir, dir) || len(again.Groups) != 2 ||
		size(again) != 3 || size(st) != 3 {
		t.Errorf("the copy loads otherwise:\n%s\nthan the directory:\n%s", render(again, againDiags), render(st, diags))
	}
}
